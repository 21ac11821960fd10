package decode

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluice-db/sluice/schema"
)

// sequenceDDL refuses CREATE, ALTER and DROP SEQUENCE of a replicated name
// (issue 29, N11). sluice replicates no sequence: its state travels as row
// events on the sequence table, which a target cannot take exactly, and a
// sequence left behind silently would make a later NEXT VALUE default or
// the sequence's rows stop the task far from the cause. `sluice check`
// refuses the sequences that exist when the task starts; this refuses those
// the stream creates. Excluded sequences pass as before (nothing to do).
func (d *Decoder) sequenceDDL(def string, st ast.StmtNode) error {
	var names []*ast.TableName
	switch s := st.(type) {
	case *ast.CreateSequenceStmt:
		names = []*ast.TableName{s.Name}
	case *ast.AlterSequenceStmt:
		names = []*ast.TableName{s.Name}
	case *ast.DropSequenceStmt:
		names = s.Sequences
	}
	for _, tn := range names {
		if ref := schema.RefOf(tn, def); d.selectedTable(ref) {
			return fmt.Errorf("sequence %s: sluice replicates no sequence; add it to tables.exclude and create or change it on the target yourself", ref)
		}
	}
	return nil
}
