//go:build linux && (amd64 || arm64)

package aio

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

// aligned returns n bytes at a 4096-aligned address, as O_DIRECT wants.
func aligned(n int) []byte {
	b := make([]byte, n+4096)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 4095)
	return b[skip : skip+n : skip+n]
}

// openDirect opens a preallocated file for O_DIRECT|O_DSYNC writes, as the
// dtx store's log does, or skips where the file system refuses O_DIRECT.
func openDirect(t *testing.T, size int) (*os.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT|syscall.O_DSYNC, 0)
	if err != nil {
		t.Skipf("no O_DIRECT here: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

func TestWriteAtWritesWhatItSays(t *testing.T) {
	w, err := New()
	if err != nil {
		t.Skipf("no native AIO: %v", err)
	}
	defer w.Close()
	f, path := openDirect(t, 64<<10)
	// Several writers at once: each write must land whole at its offset.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				b := aligned(4096)
				for k := range b {
					b[k] = byte(i*20 + j)
				}
				n, err := w.WriteAt(f, b, int64(i)*4096)
				if err != nil || n != len(b) {
					errs <- errors.Join(err, errors.New("short or failed write"))
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		want := bytes.Repeat([]byte{byte(i*20 + 19)}, 4096)
		if !bytes.Equal(got[i*4096:(i+1)*4096], want) {
			t.Errorf("block %d does not hold its last write", i)
		}
	}
	if !bytes.Equal(got[8*4096:], make([]byte, len(got)-8*4096)) {
		t.Error("bytes past the written blocks changed")
	}
}

// A request the kernel refuses to queue (a file not open for writing) is
// a SubmitError, so that the caller can fall back to a plain write; one
// the device path rejects (O_DIRECT with a misaligned buffer) fails as
// pwrite would, with EINVAL. Neither breaks the context.
func TestRefusedWrites(t *testing.T) {
	w, err := New()
	if err != nil {
		t.Skipf("no native AIO: %v", err)
	}
	defer w.Close()
	f, path := openDirect(t, 8192)
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_, err = w.WriteAt(ro, aligned(4096), 0)
	var se *SubmitError
	if !errors.As(err, &se) || !errors.Is(err, syscall.EBADF) {
		t.Errorf("write to a read-only file: %v, want a SubmitError with EBADF", err)
	}
	if _, err = w.WriteAt(f, aligned(4096 + 1)[1:], 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("misaligned O_DIRECT write: %v, want EINVAL", err)
	}
	if _, err := w.WriteAt(f, aligned(4096), 0); err != nil {
		t.Fatal(err)
	}
}

func TestClosedWriter(t *testing.T) {
	w, err := New()
	if err != nil {
		t.Skipf("no native AIO: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	f, _ := openDirect(t, 4096)
	if _, err := w.WriteAt(f, aligned(4096), 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after Close: %v, want os.ErrClosed", err)
	}
}
