package dump

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/atomicfile"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/internal/private"
)

// DirSink writes a dump directory: schema files, one data file per chunk
// (written to a temporary name, fsynced, then renamed, so a chunk file
// either is whole or does not exist) and, once every chunk is written,
// metadata.json, without which load refuses the directory.
type DirSink struct {
	dir string
	mu  sync.Mutex
	// chunks records finished chunks per table.
	chunks map[sluice.TableRef][]dumpfmt.ChunkMeta
}

// NewDirSink prepares dir. It refuses a directory that already holds a
// finished dump, so one is never overwritten by accident.
//
// It also refuses a directory that holds anything but an unfinished dump's
// files: a dump among other files mixed its chunks with them, and the
// directory's mode was tightened to 0700 under its owner's feet.
func NewDirSink(dir string) (*DirSink, error) {
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if !dumpFileName(e.Name()) {
				return nil, &sluice.Error{Op: "dump to " + dir, Err: fmt.Errorf("%w: the directory holds files that are not a dump's (%s)", sluice.ErrConfig, e.Name()),
					Hint: "choose a new or empty --dir"}
			}
		}
	}
	if err := private.MkdirAll(dir); err != nil {
		return nil, dumpfmt.DiskError("create dump directory", err)
	}
	if _, err := os.Stat(filepath.Join(dir, dumpfmt.MetadataFile)); err == nil {
		return nil, &sluice.Error{Op: "dump to " + dir, Err: fmt.Errorf("%w: the directory already holds a finished dump", sluice.ErrConfig), Hint: "choose an empty --dir or remove the old dump"}
	}
	return &DirSink{dir: dir, chunks: map[sluice.TableRef][]dumpfmt.ChunkMeta{}}, nil
}

// WriteSchemas writes CREATE DATABASE and CREATE TABLE files.
func (s *DirSink) WriteSchemas(tables []*TablePlan) error {
	done := map[string]bool{}
	for _, tp := range tables {
		ref := tp.Table.Ref
		if !done[ref.Schema] {
			done[ref.Schema] = true
			q := "CREATE DATABASE IF NOT EXISTS " + sluice.QuoteIdent(ref.Schema) + ";\n"
			if err := dumpfmt.WriteFileAtomic(s.dir, dumpfmt.SchemaCreateFile(ref.Schema), []byte(q)); err != nil {
				return err
			}
		}
		if err := dumpfmt.WriteFileAtomic(s.dir, dumpfmt.TableSchemaFile(ref), []byte(tp.Table.CreateSQL+";\n")); err != nil {
			return err
		}
	}
	return nil
}

// OpenChunk implements Sink.
func (s *DirSink) OpenChunk(_ context.Context, t *sluice.Table, r chunk.Range) (ChunkWriter, error) {
	name := dumpfmt.ChunkFile(t.Ref, r.Index)
	f, err := os.CreateTemp(s.dir, "."+name+".tmp*")
	if err != nil {
		return nil, dumpfmt.DiskError("dump: create "+name, err)
	}
	return &fileChunk{s: s, ref: t.Ref, r: r, name: name, f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

type fileChunk struct {
	s     *DirSink
	ref   sluice.TableRef
	r     chunk.Range
	name  string
	f     *os.File
	w     *bufio.Writer
	bytes int64
}

func (c *fileChunk) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.bytes += int64(n)
	if err != nil {
		return n, dumpfmt.DiskError("dump: write "+c.name, err)
	}
	return n, nil
}

func (c *fileChunk) Abort(error) {
	c.f.Close()
	os.Remove(c.f.Name())
}

func (c *fileChunk) Commit(rows int64) error {
	err := c.w.Flush()
	if err == nil {
		err = c.f.Sync()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = atomicfile.Rename(c.f.Name(), filepath.Join(c.s.dir, c.name))
	}
	if err != nil {
		os.Remove(c.f.Name())
		return dumpfmt.DiskError("dump: write "+c.name, err)
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.chunks[c.ref] = append(c.s.chunks[c.ref], dumpfmt.ChunkMeta{
		Index: c.r.Index, Lo: dumpfmt.KeyOf(c.r.Lo), Hi: dumpfmt.KeyOf(c.r.Hi), File: c.name, Rows: rows, Bytes: c.bytes,
	})
	return nil
}

// Finish writes metadata.json, which marks the dump complete. Call it only
// after Run returned nil.
func (s *DirSink) Finish(d *Dumper) error {
	if err := atomicfile.SyncDir(s.dir); err != nil {
		return dumpfmt.DiskError("dump: sync "+s.dir, err)
	}
	m := &dumpfmt.Metadata{Version: dumpfmt.Version, Source: d.cfg.Source.Addr(), Started: d.started.UTC(),
		Finished: time.Now().UTC(), Position: d.pos, Complete: true}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tp := range d.tables {
		cs := s.chunks[tp.Table.Ref]
		if len(cs) != len(tp.Chunks) {
			return fmt.Errorf("dump: %s: %d of %d chunks written", tp.Table.Ref, len(cs), len(tp.Chunks))
		}
		sort.Slice(cs, func(a, b int) bool { return cs[a].Index < cs[b].Index })
		m.Tables = append(m.Tables, dumpfmt.TableMeta{Table: tp.Table, SchemaFile: dumpfmt.TableSchemaFile(tp.Table.Ref), Chunks: cs})
	}
	return dumpfmt.WriteMetadata(s.dir, m)
}

// dumpFileName reports whether name is one a dump writes (an unfinished
// dump's files may be written over by the next).
func dumpFileName(name string) bool {
	switch {
	case name == dumpfmt.MetadataFile,
		strings.HasSuffix(name, "-schema-create.sql"),
		strings.HasSuffix(name, "-schema.sql"),
		strings.HasSuffix(name, ".tsv"),
		strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp"):
		return true
	}
	return false
}
