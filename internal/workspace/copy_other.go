//go:build !linux

package workspace

import "errors"

var errUnsupported = errors.New("not supported on this system")

func reflink(src, dst string) error { return errUnsupported }

func exchange(a, b string) error { return errUnsupported }
