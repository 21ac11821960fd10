//go:build !linux

package boltstore

import (
	"errors"
	"os"
)

func openDirect(string) (*os.File, error) { return nil, errors.ErrUnsupported }
