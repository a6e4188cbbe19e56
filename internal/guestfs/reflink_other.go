//go:build !linux

package guestfs

import (
	"errors"
	"os"
)

var errUnsupported = errors.New("not supported on this system")

func reflink(src, dst string) error { return errUnsupported }

func clone(dst, src *os.File) error { return errUnsupported }
