// Package atomicfile is the one way sluice replaces a file: write a
// temporary file in the same directory, fsync it, rename it over the name,
// and fsync the directory (litestream's internal.WriteFile pattern). After a
// crash at any point the name holds either the old content or all of the
// new, and once WriteFile returns the new content survives a power loss:
// without the directory fsync the rename itself may be lost, and without
// the file fsync the renamed file may be empty.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, with mode perm.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp) // a full disk must not leave a temporary file behind
		return err
	}
	return nil
}

// Rename moves a file that the caller has written and synced over newpath,
// and makes the rename durable.
func Rename(oldpath, newpath string) error {
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(newpath))
}

// SyncDir makes the renames and creations in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
