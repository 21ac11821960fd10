package replicate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/atomicfile"
	"github.com/sluice-db/sluice/internal/private"
)

// HandlesFile lists, in the task directory, the source statements and
// transactions the user told sluice to skip or to replace (sluice skip,
// sluice replace, as DM's handle-error): the way out of a statement sluice
// refuses, without editing checkpoints by hand. It is also the task's
// record of them, which sluice status shows.
const HandlesFile = "handle-error.json"

// Handle is one such instruction.
type Handle struct {
	// GTID names a transaction; Position ("file:pos", as the refusal
	// printed it) names one statement. One of the two is set.
	GTID     string    `json:"gtid,omitempty"`
	Position string    `json:"position,omitempty"`
	Action   string    `json:"action"` // "skip" or "replace"
	SQL      []string  `json:"sql,omitempty"`
	Added    time.Time `json:"added"`
	// Used is when replication first met the statement (zero: not yet).
	Used time.Time `json:"used,omitempty"`
}

func (h Handle) String() string {
	what := "GTID " + h.GTID
	if h.GTID == "" {
		what = "position " + h.Position
	}
	s := h.Action + " " + what
	if len(h.SQL) > 0 {
		s += " with " + strconv.Quote(strings.Join(h.SQL, "; "))
	}
	if h.Used.IsZero() {
		return s + " (pending)"
	}
	return s + " (done " + h.Used.UTC().Format(time.RFC3339) + ")"
}

// ReadHandles reads the task's handles (none when the file is missing).
func ReadHandles(dir string) ([]Handle, error) {
	b, err := os.ReadFile(filepath.Join(dir, HandlesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var hs []Handle
	if err := json.Unmarshal(b, &hs); err != nil {
		return nil, &sluice.Error{Op: "read " + filepath.Join(dir, HandlesFile), Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err),
			Hint: "fix or remove the file (it lists what sluice skip and sluice replace recorded)"}
	}
	return hs, nil
}

// WriteHandles replaces the task's handles atomically.
func WriteHandles(dir string, hs []Handle) error {
	if err := private.MkdirAll(dir); err != nil {
		return err
	}
	b, err := json.MarshalIndent(hs, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, HandlesFile), append(b, '\n'), private.FileMode)
}

// AddHandle records h for the task in dir, replacing an earlier one for the
// same statement.
func AddHandle(dir string, h Handle) error {
	hs, err := ReadHandles(dir)
	if err != nil {
		return err
	}
	out := hs[:0]
	for _, o := range hs {
		if o.GTID != h.GTID || o.Position != h.Position {
			out = append(out, o)
		}
	}
	return WriteHandles(dir, append(out, h))
}

// handler is the decoder's Config.Handle over the task's handles; it marks
// a handle used the first time replication meets its statement.
type handler struct {
	mu  sync.Mutex
	dir string
	hs  []Handle
	log func(format string, args ...any)
}

// used counts the skips and replacements replication has met.
func (h *handler) used() (skipped, replaced uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.hs {
		if x.Used.IsZero() {
			continue
		}
		if x.Action == "skip" {
			skipped++
		} else {
			replaced++
		}
	}
	return
}

func (h *handler) handle(gtid string, pos sluice.Position) *decode.Handling {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.hs {
		x := &h.hs[i]
		match := x.GTID != "" && x.GTID == gtid ||
			x.Position != "" && pos.File != "" && x.Position == pos.File+":"+strconv.FormatUint(uint64(pos.Pos), 10)
		if !match {
			continue
		}
		if x.Used.IsZero() {
			x.Used = time.Now()
			if h.log != nil {
				h.log("%s", "handle-error: "+x.String())
			}
			if err := WriteHandles(h.dir, h.hs); err != nil && h.log != nil {
				h.log("handle-error: record use: %v", err)
			}
		}
		return &decode.Handling{Skip: x.Action == "skip", SQL: x.SQL}
	}
	return nil
}
