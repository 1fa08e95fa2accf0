package testenv

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresServer is a PostgreSQL cluster owned by one test (or one test
// binary, when started from a helper shared by its tests).
type PostgresServer struct {
	Port int

	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	stop    sync.Once
	dbCount atomic.Int64
}

// PostgresOptions tunes StartPostgresWith.
type PostgresOptions struct {
	// Durable keeps fsync and synchronous commit on, for benchmarks that
	// measure durable writes. Tests leave it off: they are faster and a
	// throwaway cluster has nothing to lose.
	Durable bool
}

// StartPostgres starts a non-durable throwaway cluster; see StartPostgresWith.
func StartPostgres(tb testing.TB) *PostgresServer {
	tb.Helper()
	return StartPostgresWith(tb, PostgresOptions{})
}

var pgBinDirs = []string{"/usr/lib/postgresql/*/bin"}

// StartPostgresWith initialises a cluster in a temporary directory, starts
// it on a free 127.0.0.1 port with trust authentication for user
// "postgres", and stops it when tb ends. As root it runs the server as the
// postgres user, since PostgreSQL refuses to run as root.
func StartPostgresWith(tb testing.TB, opts PostgresOptions) *PostgresServer {
	tb.Helper()
	how := "apt-get install postgresql"
	initdb, err := lookBinary("initdb", pgBinDirs...)
	if err != nil {
		Unavailable(tb, "PostgreSQL is not installed (no initdb)", how)
	}
	postgres, err := lookBinary("postgres", pgBinDirs...)
	if err != nil {
		Unavailable(tb, "PostgreSQL is not installed (no postgres)", how)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			Unavailable(tb, "running as root and there is no postgres user to run PostgreSQL as", how)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "shardwise-pg-")
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	p := &PostgresServer{dir: dir}
	tb.Cleanup(func() {
		p.Stop()
		os.RemoveAll(dir)
	})
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	if cred != nil {
		for _, d := range []string{dir, data} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				tb.Fatalf("testenv: chown %s: %v", d, err)
			}
		}
	}
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
		return cmd
	}
	if out, err := run(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		tb.Fatalf("testenv: initdb: %v\n%s", err, out)
	}
	p.Port = FreePort(tb)
	args := []string{"-D", data, "-p", strconv.Itoa(p.Port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + dir,
		"-c", "max_connections=200",
		"-c", "shared_buffers=64MB",
	}
	if !opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	logPath := filepath.Join(dir, "postgres.log")
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	defer logf.Close()
	cmd := run(postgres, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		tb.Fatalf("testenv: start postgres: %v", err)
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.exited) }()
	if err := p.waitReady(30 * time.Second); err != nil {
		tb.Fatalf("testenv: postgres: %v\n%s", err, tail(logPath, 4000))
	}
	return p
}

// URL returns the connection URL of database db.
func (p *PostgresServer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.Port, db)
}

func (p *PostgresServer) waitReady(limit time.Duration) error {
	if err := waitDial("127.0.0.1:"+strconv.Itoa(p.Port), limit, p.exited); err != nil {
		return err
	}
	end := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, p.URL("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("not ready within %v: %w", limit, err)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("postgres exited during start-up")
		case <-time.After(50 * time.Millisecond): // polling interval
		}
	}
}

// NewDatabase creates a fresh, empty database and returns its URL. It is
// dropped with the server.
func (p *PostgresServer) NewDatabase(tb testing.TB) string {
	tb.Helper()
	return p.NewDatabaseWith(tb, "")
}

// NewDatabaseWith is NewDatabase with options appended to its CREATE
// DATABASE, e.g. "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en'"
// for a database whose text sorts by a language's rules.
func (p *PostgresServer) NewDatabaseWith(tb testing.TB, options string) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%d", time.Now().UnixNano()%1e9, p.dbCount.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		tb.Fatalf("testenv: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" "+options); err != nil {
		tb.Fatalf("testenv: create database: %v", err)
	}
	return p.URL(name)
}

// Template hands tests databases of one template a migration made once:
// a copy of it (CREATE DATABASE … TEMPLATE, a file copy) or, once a test
// is done with one, the same database emptied by a statement. Creating a
// database is about 0.1 s of the server's CPU and emptying one a
// statement; a contract suite that wants a database per case pays that
// many times (issue 28: the suite's time). An emptied database holds what
// a fresh copy holds as long as the tests change only rows, never the
// schema.
type Template struct {
	p     *PostgresServer
	name  string
	empty string

	mu   sync.Mutex
	free []string // URLs of emptied databases
}

// NewTemplate makes a template: migrate runs on a new database, which it
// must leave with no connection open (a template is copied only then),
// and empty, the statement that makes a used copy equal to a fresh one,
// must truncate every table the migration made but those in keep
// (RequireTruncated).
func (p *PostgresServer) NewTemplate(tb testing.TB, migrate func(dbURL string) error, empty string, keep ...string) *Template {
	tb.Helper()
	raw := p.NewDatabase(tb)
	if err := migrate(raw); err != nil {
		tb.Fatalf("testenv: migrate the template: %v", err)
	}
	RequireTruncated(tb, raw, empty, keep...)
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatal(err)
	}
	return &Template{p: p, name: strings.TrimPrefix(u.Path, "/"), empty: empty}
}

// Database returns the URL of an emptied database or of a new copy of the
// template. Its cleanup, registered before anything the test opens on it
// (so run after their cleanups), empties it for the next test; a database
// that does not empty is not reused.
func (tm *Template) Database(tb testing.TB) string {
	tb.Helper()
	tm.mu.Lock()
	var dbURL string
	if n := len(tm.free); n > 0 {
		dbURL, tm.free = tm.free[n-1], tm.free[:n-1]
	}
	tm.mu.Unlock()
	if dbURL == "" {
		dbURL = tm.p.NewDatabaseWith(tb, "TEMPLATE "+tm.name+" STRATEGY FILE_COPY")
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, tm.empty); err != nil {
			return
		}
		tm.mu.Lock()
		tm.free = append(tm.free, dbURL)
		tm.mu.Unlock()
	})
	return dbURL
}

// RequireTruncated fails tb unless the TRUNCATE statement truncate names
// every table of the database at dbURL (its current schema) but those in
// keep: for tests that reuse a database by emptying it with a hand-kept
// list, so that a migration adding a table cannot leave rows behind
// between the cases that share it.
func RequireTruncated(tb testing.TB, dbURL, truncate string, keep ...string) {
	tb.Helper()
	listed := truncatedTables(truncate)
	for _, k := range keep {
		listed[k] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		tb.Fatalf("testenv: connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
	if err != nil {
		tb.Fatalf("testenv: list tables: %v", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatalf("testenv: list tables: %v", err)
	}
	if len(tables) == 0 {
		tb.Fatalf("testenv: the database at %s has no tables", dbURL)
	}
	for _, name := range tables {
		if !listed[name] {
			tb.Errorf("testenv: table %s is not emptied by %q (a migration that adds a table adds it there)", name, truncate)
		}
	}
}

// truncatedTables returns the tables the first TRUNCATE of stmt names.
func truncatedTables(stmt string) map[string]bool {
	out := make(map[string]bool)
	_, list, ok := strings.Cut(stmt, "TRUNCATE ")
	if !ok {
		return out
	}
	list, _, _ = strings.Cut(list, ";")
	list, _, _ = strings.Cut(list, " RESTART")
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out[name] = true
		}
	}
	return out
}

// Stop shuts the server down (fast shutdown, then SIGKILL after 20 s) and
// waits for it. It is idempotent.
func (p *PostgresServer) Stop() {
	p.stop.Do(func() {
		if p.cmd == nil {
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	})
}
