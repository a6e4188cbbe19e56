//go:build !linux

package workspace

import "errors"

func exchange(a, b string) error { return errors.New("not supported on this system") }

func renameNoReplace(a, b string) error { return errors.New("not supported on this system") }
