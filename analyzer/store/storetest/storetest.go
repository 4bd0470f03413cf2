// Package storetest breaks a store on purpose, for tests of what happens
// when a write fails in the middle of a step (the database restarted, a
// disk full): a trigger that refuses every update of a table, on SQLite
// and on PostgreSQL alike, until it is lifted.
package storetest

import (
	"context"
	"regexp"
	"sync"
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

var ident = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Fault is the refusal of a table's updates.
type Fault struct {
	t     testing.TB
	st    *store.Store
	table string
	once  sync.Once
}

// RefuseUpdates makes every UPDATE of table fail with an error that names
// the injection, until Lift (or the test's end).
func RefuseUpdates(t testing.TB, st *store.Store, table string) *Fault {
	t.Helper()
	if !ident.MatchString(table) {
		t.Fatalf("storetest: %q is not a table name", table)
	}
	f := &Fault{t: t, st: st, table: table}
	stmts := []string{`CREATE TRIGGER gw_refuse_` + table + ` BEFORE UPDATE ON ` + table +
		` BEGIN SELECT RAISE(ABORT, 'storetest: updates of ` + table + ` refused'); END`}
	if st.Postgres() {
		stmts = []string{
			`CREATE OR REPLACE FUNCTION gw_refuse_` + table + `() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'storetest: updates of ` + table + ` refused'; END $$`,
			`CREATE TRIGGER gw_refuse_` + table + ` BEFORE UPDATE ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION gw_refuse_` + table + `()`,
		}
	}
	for _, q := range stmts {
		if _, err := st.DB().ExecContext(context.Background(), q); err != nil {
			t.Fatalf("storetest: %v", err)
		}
	}
	t.Cleanup(f.Lift)
	return f
}

// Lift lets updates through again.
func (f *Fault) Lift() {
	f.once.Do(func() {
		if _, err := f.st.DB().ExecContext(context.Background(), `DROP TRIGGER gw_refuse_`+f.table+onTable(f)); err != nil {
			f.t.Errorf("storetest: lift: %v", err)
		}
	})
}

func onTable(f *Fault) string {
	if f.st.Postgres() {
		return ` ON ` + f.table
	}
	return ""
}
