//go:build !linux

package guestfs

import "errors"

func reflink(src, dst string) error { return errors.New("not supported on this system") }
