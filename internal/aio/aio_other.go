//go:build !linux || !(amd64 || arm64)

package aio

import "os"

// Writer is not available here.
type Writer struct{}

// New reports that native AIO is not available here.
func New() (*Writer, error) { return nil, ErrUnsupported }

// WriteAt is never called: New fails.
func (w *Writer) WriteAt(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }

// Close does nothing.
func (w *Writer) Close() error { return nil }
