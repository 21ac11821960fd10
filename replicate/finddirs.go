package replicate

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// FindTaskDirs returns the task directories under root (a task.lock or a
// status.json in them), up to four levels down, sorted: what sluice task
// list and the console list. The relay and dump directories inside a task
// are not searched.
func FindTaskDirs(root string) ([]string, error) {
	depth0 := strings.Count(filepath.Clean(root), string(filepath.Separator))
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() && p != root {
				return fs.SkipDir // unreadable: not ours to list
			}
			return err
		}
		if d.IsDir() {
			if strings.Count(filepath.Clean(p), string(filepath.Separator))-depth0 > 4 || d.Name() == "relay" || d.Name() == "dump" {
				return fs.SkipDir
			}
			return nil
		}
		if d.Name() == "task.lock" || d.Name() == StatusFile {
			seen[filepath.Dir(p)] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("task list %s: %w", root, err)
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs, nil
}
