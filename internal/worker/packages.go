package worker

import (
	"context"

	"github.com/tetratelabs/wazero/api"
)

// PackageSource answers a run's package requests: the guest's loader asks
// it for the workspace's packages and to install more (execd.packages in
// sandbox/ABI.md). The worker carries the requests and answers as they
// are, JSON both; what they mean is the caller's (internal/workspace).
// Packages is called on the goroutine running the guest, which waits for
// it; it must return soon after ctx ends (the run is being stopped: the
// answer is then dropped).
type PackageSource interface {
	Packages(ctx context.Context, request []byte) []byte
}

// PackagesMount is where the guest sees Config.PackagesDir, read-only.
const PackagesMount = "/packages"

// maxPackageRequest is the most of a request the host reads.
const maxPackageRequest = 1 << 20

// The return codes of execd.packages besides a length.
const (
	packagesStopped = -4       // the host stops the cell (as input's)
	packagesNone    = heldNone // execd.packages_answer: nothing held
)

// unavailable is the answer when the run has no PackageSource.
var unavailable = []byte(`{"error":"packages are not available in this sandbox (execd runs without [packages])","code":"off"}`)

// hostPackages hands a request to the run's PackageSource:
// (req_ptr, req_len, buf_ptr, buf_cap) -> i32, the length of the answer,
// written to buf when it fits and otherwise held for hostPackagesAnswer,
// or packagesStopped. The run's timer stops while it waits: fetching a
// package is not the code's time.
func hostPackages(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	stack[0] = api.EncodeI32(st.packages(mod, uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])))
}

func (st *runState) packages(mod api.Module, reqPtr, reqLen, bufPtr, bufCap uint32) int32 {
	if st == nil || st.finished.Load() || st.interrupt.Load() {
		return packagesStopped
	}
	st.pkgAnswer.b = nil
	ans := unavailable
	if st.pkgs != nil {
		if reqLen > maxPackageRequest {
			ans = []byte(`{"error":"the package request is larger than 1 MiB","code":"invalid"}`)
		} else {
			b, ok := mod.Memory().Read(reqPtr, reqLen)
			if !ok {
				return packagesStopped
			}
			req := append([]byte(nil), b...)
			st.waitOutside(func() { ans = st.pkgs.Packages(st.stopCtx, req) })
		}
	}
	if st.stopCtx.Err() != nil || st.interrupt.Load() {
		return packagesStopped
	}
	if n := st.pkgAnswer.hand(mod, ans, bufPtr, bufCap); n != heldNone {
		return n
	}
	return packagesStopped
}

// hostPackagesAnswer hands over the answer the last execd.packages held
// because it did not fit: (buf_ptr, buf_cap) -> i32, its length, written
// to buf when it fits (and then forgotten), or packagesNone.
func hostPackagesAnswer(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	stack[0] = api.EncodeI32(st.takePackagesAnswer(mod, uint32(stack[0]), uint32(stack[1])))
}

func (st *runState) takePackagesAnswer(mod api.Module, bufPtr, bufCap uint32) int32 {
	if st == nil || st.finished.Load() {
		return packagesNone
	}
	return st.pkgAnswer.take(mod, bufPtr, bufCap)
}
