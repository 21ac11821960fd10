package dumpfmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/atomicfile"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/internal/private"
)

// Version is the dump directory format version in metadata.json.
const Version = 1

// MetadataFile names the file that describes a dump. It is written last,
// atomically: a directory without it (or with Complete false) is not a
// finished dump and load refuses it.
const MetadataFile = "metadata.json"

// Metadata describes a dump directory.
type Metadata struct {
	Version  int             `json:"version"`
	Source   string          `json:"source"` // host:port, never the password
	Started  time.Time       `json:"started"`
	Finished time.Time       `json:"finished"`
	Position sluice.Position `json:"position"` // binlog position and GTID set of the snapshot
	Complete bool            `json:"complete"`
	Tables   []TableMeta     `json:"tables"`
}

// TableMeta is one dumped table.
type TableMeta struct {
	Table      *sluice.Table `json:"table"`
	SchemaFile string        `json:"schema_file"`
	Chunks     []ChunkMeta   `json:"chunks"`
}

// ChunkMeta is one chunk's key range and the file holding its rows.
type ChunkMeta struct {
	Index int    `json:"index"`
	Lo    Key    `json:"lo,omitempty"`
	Hi    Key    `json:"hi,omitempty"`
	File  string `json:"file"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// Range is the chunk's key range.
func (c ChunkMeta) Range() chunk.Range {
	return chunk.Range{Index: c.Index, Lo: c.Lo.Values(), Hi: c.Hi.Values()}
}

// KeyPart is one key column's boundary value, typed so that binary values
// come back as []byte (sent as _binary) and text as string.
type KeyPart struct {
	S    *string `json:"s,omitempty"`
	B    []byte  `json:"b,omitempty"`
	Null bool    `json:"null,omitempty"`
}

// Key is a chunk boundary; nil means open.
type Key []KeyPart

// KeyOf converts chunk.Range bound values.
func KeyOf(vals []any) Key {
	if vals == nil {
		return nil
	}
	k := make(Key, len(vals))
	for i, v := range vals {
		switch x := v.(type) {
		case nil:
			k[i].Null = true
		case string:
			s := x
			k[i].S = &s
		case []byte:
			k[i].B = append([]byte{}, x...)
		default:
			s := fmt.Sprint(x)
			k[i].S = &s
		}
	}
	return k
}

// Values converts back to chunk.Range bound values.
func (k Key) Values() []any {
	if k == nil {
		return nil
	}
	out := make([]any, len(k))
	for i, p := range k {
		switch {
		case p.Null:
			out[i] = nil
		case p.S != nil:
			out[i] = *p.S
		default:
			b := p.B
			if b == nil {
				b = []byte{}
			}
			out[i] = b
		}
	}
	return out
}

// Plan is a table's chunk list in a form that survives JSON.
type Plan []ChunkMeta

// PlanOf converts chunk ranges.
func PlanOf(rs []chunk.Range) Plan {
	p := make(Plan, len(rs))
	for i, r := range rs {
		p[i] = ChunkMeta{Index: r.Index, Lo: KeyOf(r.Lo), Hi: KeyOf(r.Hi)}
	}
	return p
}

// Ranges converts back.
func (p Plan) Ranges() []chunk.Range {
	out := make([]chunk.Range, len(p))
	for i, c := range p {
		out[i] = c.Range()
	}
	return out
}

// escapeName keeps file names portable and unambiguous whatever the
// identifier holds: anything but [A-Za-z0-9_-] becomes %XX (so '.' never
// appears inside a part and can separate schema from table).
func escapeName(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// SchemaCreateFile names the CREATE DATABASE file of a schema.
func SchemaCreateFile(schema string) string { return escapeName(schema) + "-schema-create.sql" }

// TableSchemaFile names the CREATE TABLE file of a table.
func TableSchemaFile(t sluice.TableRef) string {
	return escapeName(t.Schema) + "." + escapeName(t.Name) + "-schema.sql"
}

// ChunkFile names a chunk's data file.
func ChunkFile(t sluice.TableRef, index int) string {
	return fmt.Sprintf("%s.%s.%05d.tsv", escapeName(t.Schema), escapeName(t.Name), index)
}

// WriteFileAtomic writes data to dir/name through a temporary file, fsync
// and rename, so name either holds all of data or does not exist.
func WriteFileAtomic(dir, name string, data []byte) error {
	if err := atomicfile.WriteFile(filepath.Join(dir, name), data, private.FileMode); err != nil {
		return DiskError("write "+filepath.Join(dir, name), err)
	}
	return nil
}

// DiskError turns a full disk into sluice.ErrDiskFull with a fix; other
// errors are wrapped with op.
func DiskError(op string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: %v", sluice.ErrDiskFull, err), Hint: "free space in the dump directory or choose another --dir, then run the dump again"}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// WriteMetadata writes metadata.json atomically.
func WriteMetadata(dir string, m *Metadata) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(dir, MetadataFile, append(b, '\n'))
}

// ReadMetadata reads a finished dump's metadata.
func ReadMetadata(dir string) (*Metadata, error) {
	b, err := os.ReadFile(filepath.Join(dir, MetadataFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, &sluice.Error{Op: "read dump " + dir, Err: fmt.Errorf("%w: no %s: the dump did not finish, or this is not a dump directory", sluice.ErrConfig, MetadataFile), Hint: "run 'sluice dump' again (into an empty directory) and load the directory it writes"}
	}
	if err != nil {
		return nil, &sluice.Error{Op: "read dump " + dir, Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "pass the directory written by a finished 'sluice dump' with --dir"}
	}
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, &sluice.Error{Op: "read dump " + dir, Err: fmt.Errorf("%w: %s: %v", sluice.ErrConfig, MetadataFile, err), Hint: "run 'sluice dump' again into an empty directory"}
	}
	if m.Version != Version {
		return nil, &sluice.Error{Op: "read dump " + dir, Err: fmt.Errorf("%w: format version %d, this sluice reads %d", sluice.ErrConfig, m.Version, Version), Hint: "dump again with this sluice version"}
	}
	if !m.Complete {
		return nil, &sluice.Error{Op: "read dump " + dir, Err: fmt.Errorf("%w: the dump did not finish", sluice.ErrConfig), Hint: "run 'sluice dump' again; an interrupted dump cannot be loaded"}
	}
	return &m, nil
}
