package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The store on PostgreSQL (--storage.url postgres://...): several analyzer
// replicas share one database, so the lease, the escalation ladder, the
// audit log and the report outbox survive a failover whole. The packages that
// own tables write one SQL, the subset of SQLite's that PostgreSQL reads the
// same; this file is the dialect seam for the rest, applied at the driver so
// that every package keeps a plain *sql.DB:
//   - placeholders: ? becomes $1, $2, ...;
//   - the column named user, a reserved word in PostgreSQL (a bare user is
//     current_user there), is quoted;
//   - in the migrations only, SQLite's types become PostgreSQL's: INTEGER is
//     BIGINT (milliseconds do not fit 32 bits), REAL is DOUBLE PRECISION, an
//     AUTOINCREMENT key is an identity column, and TEXT compares bytewise
//     (COLLATE "C") as SQLite's does, for the key-prefix range scans.

// IsPostgresURL reports whether a --storage.url names a PostgreSQL database.
func IsPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// OpenURL opens the store a --storage.url names: a postgres:// or
// postgresql:// URL (a libpq connection string) opens PostgreSQL, anything
// else is a SQLite file path as for Open.
func OpenURL(u string) (*Store, error) {
	if !IsPostgresURL(u) {
		return Open(u)
	}
	return openPostgres(u)
}

// OpenReadOnlyURL opens the store a --storage.url names for reading only
// (audit, report previews): a SQLite file as OpenReadOnly does; a
// PostgreSQL database in read-only transactions, without migrating it (its
// schema must be this build's, as the analyzer leaves it).
func OpenReadOnlyURL(u string) (*Store, error) {
	if !IsPostgresURL(u) {
		return OpenReadOnly(u)
	}
	s, err := dialPostgres(u, map[string]string{"default_transaction_read_only": "on"})
	if err != nil {
		return nil, err
	}
	s.readOnly = true
	v, err := s.Version(context.Background())
	if err == nil && v != SchemaVersion() {
		err = fmt.Errorf("the database is at schema version %d, this gpuwatch reads %d (run the analyzer of this version first)", v, SchemaVersion())
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s read-only: %w", redactURL(u), err)
	}
	return s, nil
}

func openPostgres(u string) (*Store, error) {
	s, err := dialPostgres(u, nil)
	if err != nil {
		return nil, err
	}
	if err := s.migrate(context.Background()); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s: %w", redactURL(u), err)
	}
	return s, nil
}

func dialPostgres(u string, params map[string]string) (*Store, error) {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err) // pgx leaves the password out
	}
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	db := sql.OpenDB(pgConnector{stdlib.GetConnector(*cfg)})
	db.SetMaxOpenConns(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", redactURL(u), err)
	}
	return &Store{db: db, postgres: true}, nil
}

// redactURL is a connection URL without its password, for messages.
func redactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		rest := u[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if c := strings.Index(rest[:at], ":"); c >= 0 {
				return u[:i+3] + rest[:c] + ":xxxxx" + rest[at:]
			}
		}
	}
	return u
}

// pgConnector hands out connections that rewrite each statement.
type pgConnector struct{ inner driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgConn{conn.(*stdlib.Conn)}, nil
}

func (c pgConnector) Driver() driver.Driver { return c.inner.Driver() }

type pgConn struct{ c *stdlib.Conn }

func (p *pgConn) Prepare(q string) (driver.Stmt, error) { return p.c.Prepare(rebind(q)) }
func (p *pgConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return p.c.PrepareContext(ctx, rebind(q))
}
func (p *pgConn) Close() error { return p.c.Close() }
func (p *pgConn) Begin() (driver.Tx, error) {
	return p.c.BeginTx(context.Background(), driver.TxOptions{})
}
func (p *pgConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return p.c.BeginTx(ctx, o)
}
func (p *pgConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return p.c.ExecContext(ctx, rebind(q), args)
}
func (p *pgConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return p.c.QueryContext(ctx, rebind(q), args)
}
func (p *pgConn) Ping(ctx context.Context) error { return p.c.Ping(ctx) }

// CheckNamedValue stores a bool as SQLite does, 0 or 1: the columns are
// integers on both.
func (p *pgConn) CheckNamedValue(nv *driver.NamedValue) error {
	if b, ok := nv.Value.(bool); ok {
		nv.Value = int64(0)
		if b {
			nv.Value = int64(1)
		}
		return nil
	}
	return p.c.CheckNamedValue(nv)
}
func (p *pgConn) ResetSession(ctx context.Context) error { return p.c.ResetSession(ctx) }

// rebind turns a statement in the store's SQL into PostgreSQL's: ? into $n
// and the identifier user into "user", outside string literals, quoted
// identifiers and comments.
func rebind(q string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(q) {
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c { // doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			if j < len(q) {
				j++
			}
			b.WriteString(q[i:j])
			i = j
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			b.WriteString(q[i : i+j])
			i += j
		case c == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			i++
		case isIdent(c):
			j := i
			for j < len(q) && (isIdent(q[j]) || '0' <= q[j] && q[j] <= '9') {
				j++
			}
			w := q[i:j]
			if strings.EqualFold(w, "user") && (i == 0 || q[i-1] != '.') {
				b.WriteString(`"user"`)
			} else {
				b.WriteString(w)
			}
			i = j
		case '0' <= c && c <= '9':
			j := i
			for j < len(q) && (isIdent(q[j]) || '0' <= q[j] && q[j] <= '9') {
				j++
			}
			b.WriteString(q[i:j])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isIdent(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

var (
	ddlAutoKey = regexp.MustCompile(`(?i)\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b`)
	ddlInteger = regexp.MustCompile(`(?i)\bINTEGER\b`)
	ddlReal    = regexp.MustCompile(`(?i)\bREAL\b`)
	ddlText    = regexp.MustCompile(`(?i)\bTEXT\b`)
)

// pgDDL turns a migration statement's SQLite types into PostgreSQL's.
func pgDDL(stmt string) string {
	stmt = ddlAutoKey.ReplaceAllString(stmt, "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")
	stmt = ddlInteger.ReplaceAllString(stmt, "BIGINT")
	stmt = ddlReal.ReplaceAllString(stmt, "DOUBLE PRECISION")
	return ddlText.ReplaceAllString(stmt, `TEXT COLLATE "C"`)
}
