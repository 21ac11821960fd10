// Package private makes the task's state private to its owner. Relay files
// hold every row of every table and the plaintext of statements such as
// CREATE USER ... IDENTIFIED BY '...'; dump files and the status file are no
// less sensitive. A source's binlogs are 0660 in a 0750 directory; the
// task's state is 0600 in 0700 directories (issue 16).
package private

import (
	"os"
	"path/filepath"
)

// FileMode is the mode of every file sluice writes under a task directory.
const FileMode os.FileMode = 0o600

// DirMode is the mode of the task directory and the directories in it.
const DirMode os.FileMode = 0o700

// MkdirAll makes dir (and its missing parents) with DirMode, and takes the
// group's and others' access from dir if it existed with it (a task
// directory made by an older version).
func MkdirAll(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	return tighten(dir, DirMode)
}

// Tighten takes the group's and others' access from dir and the regular
// files directly in it.
func Tighten(dir string) error {
	if err := tighten(dir, DirMode); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			if err := tighten(filepath.Join(dir, e.Name()), FileMode); err != nil {
				return err
			}
		}
	}
	return nil
}

func tighten(path string, mode os.FileMode) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 == 0 {
		return nil
	}
	return os.Chmod(path, st.Mode().Perm()&mode)
}
