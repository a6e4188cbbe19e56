package egress

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"execd/internal/config"
)

func testSecrets(t testing.TB, cfgs ...config.Secret) secretSet {
	t.Helper()
	ss, err := loadSecrets("network.secrets", cfgs, func(k string) (string, bool) {
		v, ok := map[string]string{"A": "value-of-a-123", "AB": "value-of-ab-456", "SHORT": "abc"}[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func host(t testing.TB, s string) target {
	t.Helper()
	_, tg, err := parseTarget(s)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestSecretSubstitution(t *testing.T) {
	ss := testSecrets(t,
		config.Secret{Name: "A", Env: "A", Hosts: []string{"api.example.com"}},
		config.Secret{Name: "AB", Env: "AB", Hosts: []string{"*.example.com"}})
	api, other := host(t, "https://api.example.com/"), host(t, "https://other.test/")
	for _, tc := range []struct{ in, want string }{
		{"Bearer " + Placeholder("A"), "Bearer value-of-a-123"},
		{Placeholder("AB") + Placeholder("A"), "value-of-ab-456value-of-a-123"},
		{"__EXECD_SECRET_NOPE__ and __EXECD_SECRET_", "__EXECD_SECRET_NOPE__ and __EXECD_SECRET_"},
		{"plain", "plain"},
	} {
		got, bad := ss.substitute(tc.in, api, nil)
		if bad != nil || got != tc.want {
			t.Errorf("%q: %q %v, want %q", tc.in, got, bad, tc.want)
		}
	}
	if _, bad := ss.substitute("x"+Placeholder("A"), other, nil); bad == nil || bad.name != "A" {
		t.Errorf("a placeholder toward another host: %v", bad)
	}
	if _, bad := ss.substitute(Placeholder("A"), host(t, "https://x.example.com/"), nil); bad == nil || bad.name != "A" {
		t.Errorf("A toward x.example.com (not its host): %v", bad)
	}
	// Basic auth: the placeholder inside the base64 of user:password.
	v, bad := ss.substituteHeader("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("me:"+Placeholder("A"))), api)
	if raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(v, "Basic ")); bad != nil || string(raw) != "me:value-of-a-123" {
		t.Errorf("basic: %q %v", raw, bad)
	}
	if _, bad := ss.substituteHeader("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("me:"+Placeholder("A"))), other); bad == nil {
		t.Error("basic toward another host is not refused")
	}
	// The URL's query: the value escaped.
	ss2 := testSecrets(t, config.Secret{Name: "A", ValueFile: writeFile(t, "a&b=c+d/e\n"), Hosts: []string{"api.example.com"}})
	if q, _ := ss2.substitute("k="+Placeholder("A"), api, nil); q != "k=a&b=c+d/e" {
		t.Errorf("raw: %q", q)
	}
	if got := ss2.redactString("x a&b=c+d/e y a%26b%3Dc%2Bd%2Fe"); got != "x "+Placeholder("A")+" y "+Placeholder("A") {
		t.Errorf("redact: %q", got)
	}
	if leak := ss2.leakIn("https://other.test/?k=a%26b%3Dc%2Bd%2Fe", other); leak == nil {
		t.Error("the escaped value toward another host is not seen")
	}
	if leak := ss2.leakInBytes([]byte("..a&b=c+d/e.."), api); leak != nil {
		t.Error("the value toward its own host is called a leak")
	}
	if got := ss.redactBytes([]byte("nothing here")); string(got) != "nothing here" {
		t.Errorf("redact: %q", got)
	}
}

func writeFile(t testing.TB, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSecretConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		s    config.Secret
		says string
	}{
		{config.Secret{Name: "1X", Env: "A", Hosts: []string{"a.example"}}, "network.secrets[0].name"},
		{config.Secret{Name: "X", Hosts: []string{"a.example"}}, "exactly one of value_file and env"},
		{config.Secret{Name: "X", Env: "A", ValueFile: "/x", Hosts: []string{"a.example"}}, "exactly one of value_file and env"},
		{config.Secret{Name: "X", Env: "UNSET", Hosts: []string{"a.example"}}, "network.secrets[0] (X).env"},
		{config.Secret{Name: "X", ValueFile: "/no/such/file", Hosts: []string{"a.example"}}, "network.secrets[0] (X).value_file"},
		{config.Secret{Name: "X", Env: "SHORT", Hosts: []string{"a.example"}}, "at least 8"},
		{config.Secret{Name: "X", ValueFile: "CRLF", Hosts: []string{"a.example"}}, "control character"},
		{config.Secret{Name: "X", Env: "A"}, "network.secrets[0] (X).hosts"},
		{config.Secret{Name: "X", Env: "A", Hosts: []string{"a.example/x"}}, "network.secrets[0] (X).hosts"},
		{config.Secret{Name: "X", Env: "A", Hosts: []string{"a.example"}, Header: "Bad Name: {value}"}, ".header"},
		{config.Secret{Name: "X", Env: "A", Hosts: []string{"a.example"}, Header: "Authorization: Bearer"}, ".header"},
	} {
		if tc.s.ValueFile == "CRLF" {
			tc.s.ValueFile = writeFile(t, "line one\r\nline two")
		}
		_, err := loadSecrets("network.secrets", []config.Secret{tc.s}, func(k string) (string, bool) {
			v, ok := map[string]string{"A": "value-of-a-123", "SHORT": "abc"}[k]
			return v, ok
		})
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v; want it to say %q", tc.s, err, tc.says)
		}
	}
	_, err := loadSecrets("network.secrets", []config.Secret{{Name: "X", Env: "A", Hosts: []string{"a.example"}}, {Name: "X", Env: "A", Hosts: []string{"a.example"}}},
		func(string) (string, bool) { return "value-of-a-123", true })
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a name twice: %v", err)
	}
}

// FuzzSubstitute: with every host allowed, what substitute gives back,
// redacted, is the input again (when the input held no value), and no
// placeholder of a secret survives.
func FuzzSubstitute(f *testing.F) {
	for _, s := range []string{"Bearer __EXECD_SECRET_A__", "__EXECD_SECRET_AB____EXECD_SECRET_A__", "__EXECD_SECRET___", "x", "__EXECD_SECRET_A_"} {
		f.Add(s)
	}
	ss := testSecrets(f,
		config.Secret{Name: "A", Env: "A", Hosts: []string{"*"}},
		config.Secret{Name: "AB", Env: "AB", Hosts: []string{"*"}})
	tg := target{scheme: "https", host: "x.example", port: 443}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "value-of-") {
			return
		}
		got, bad := ss.substitute(s, tg, nil)
		if bad != nil {
			t.Fatalf("%q: refused toward an allowed host", s)
		}
		if strings.Contains(got, Placeholder("A")) && !strings.Contains(s, "value-of") {
			// only possible when a value ends what a later placeholder begins: the values do not
			t.Fatalf("%q: a placeholder survived: %q", s, got)
		}
		if back := ss.redactString(got); back != s {
			t.Fatalf("%q: substitute then redact gives %q", s, back)
		}
	})
}
