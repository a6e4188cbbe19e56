//go:build !linux

package guestfs

import (
	"errors"
	"os"
)

func clone(dst, src *os.File) error { return errors.New("not supported on this system") }
