package egress

import "fmt"

// Kind is how a request without a response ended, as the code sees it.
type Kind string

const (
	// KindRefused: the policy refused the request (or a hop of it); nothing
	// was sent to the refused destination.
	KindRefused Kind = "refused"
	// KindTimeout: network.request_timeout, or the code's own timeout,
	// passed.
	KindTimeout Kind = "timeout"
	// KindAborted: the request was given up before its end (the code
	// aborted it, or the run stopped).
	KindAborted Kind = "aborted"
	// KindFailed: the exchange failed (DNS, connection, TLS, protocol, a
	// response larger than allowed).
	KindFailed Kind = "error"
)

// Reason is a short, fixed word for why a request ended without a
// response: for logs and the status page (never a label value built from
// input).
type Reason string

const (
	ReasonScheme   Reason = "url"      // not an http(s) URL with a valid host
	ReasonHost     Reason = "host"     // no allow entry names the host
	ReasonPort     Reason = "port"     // the host is allowed, not this port or scheme
	ReasonAddress  Reason = "address"  // the host resolves to (or is) an address execd does not reach
	ReasonSecret   Reason = "secret"   // a secret would go to a host outside its hosts
	ReasonHeader   Reason = "header"   // an invalid or oversized header
	ReasonRequests Reason = "requests" // network.max_requests_per_run
	ReasonBudget   Reason = "budget"   // network.bytes_per_minute
	ReasonSize     Reason = "size"     // a body over max_request_bytes or max_response_bytes
	ReasonRedirect Reason = "redirect" // too many redirects, or redirect: "error"
	ReasonTimeout  Reason = "timeout"
	ReasonAborted  Reason = "aborted"
	ReasonTLS      Reason = "tls"
	ReasonConnect  Reason = "connect" // DNS, connection, protocol
)

// Error is why a request got no response. Message is what the code sees
// (its exception's text); it names the config key that decides, and never
// holds a secret's value or a URL's path or query.
type Error struct {
	Kind    Kind
	Reason  Reason
	Message string
}

func (e *Error) Error() string { return e.Message }

func refused(r Reason, format string, args ...any) *Error {
	return &Error{Kind: KindRefused, Reason: r, Message: fmt.Sprintf(format, args...)}
}

func failed(k Kind, r Reason, format string, args ...any) *Error {
	return &Error{Kind: k, Reason: r, Message: fmt.Sprintf(format, args...)}
}

// Outcome is a request's outcome as the metrics count it.
type Outcome string

const (
	OutcomeAllowed        Outcome = "allowed"         // a response came back (any status)
	OutcomeRefusedPolicy  Outcome = "refused_policy"  // the allow list, a limit or a secret refused it
	OutcomeRefusedAddress Outcome = "refused_address" // the dialer refused the address
	OutcomeError          Outcome = "error"           // it failed, timed out or was aborted
)

func outcomeOf(err *Error) Outcome {
	switch {
	case err == nil:
		return OutcomeAllowed
	case err.Kind == KindRefused && err.Reason == ReasonAddress:
		return OutcomeRefusedAddress
	case err.Kind == KindRefused:
		return OutcomeRefusedPolicy
	}
	return OutcomeError
}
