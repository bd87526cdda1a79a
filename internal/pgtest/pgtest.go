// Package pgtest gives tests a real PostgreSQL database.
//
// New returns the URL of a fresh, empty database of its own that is dropped
// when the test ends, so tests never see each other's tables.
//
// The databases live on the server named by TURNLEDGER_TEST_POSTGRES_URL
// (CI sets it from .ci/postgres.sh; the role in it needs CREATEDB). When the
// variable is unset, pgtest starts a throwaway server itself from the
// PostgreSQL binaries it finds (PATH, then /usr/lib/postgresql/*/bin): initdb
// into a temporary directory, postgres on a free port of 127.0.0.1, as the
// postgres user when the tests run as root. The server is stopped by Main at
// the end of the test binary, and by the kernel (parent-death signal) should
// the binary die first. With no PostgreSQL at all, New fails the test with a
// message saying how to get one: a feature that talks to PostgreSQL is never
// tested against anything else, and never skipped.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable holding the URL of a server to use.
const EnvURL = "TURNLEDGER_TEST_POSTGRES_URL"

var (
	once     sync.Once
	adminURL string
	startErr error
	started  *instance // the server pgtest started, if it started one
)

// instance is a throwaway server: its process and the directory holding its
// data, its socket and the logs of initdb (initdb.log) and of the server
// (server.log).
type instance struct {
	cmd *exec.Cmd
	dir string
}

// New returns the URL of a new empty database, dropped at the end of t.
func New(t testing.TB) string {
	t.Helper()
	once.Do(setup)
	if startErr != nil {
		t.Fatalf("pgtest: %v", startErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", redact(adminURL), err)
	}
	defer admin.Close(context.Background())
	name := "pgtest_" + randomHex(8)
	create := "CREATE DATABASE " + name
	var version int
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err == nil && version >= 150000 {
		// FILE_COPY (PostgreSQL 15+) creates the small databases of tests
		// faster than the default WAL_LOG.
		create += " STRATEGY FILE_COPY"
	}
	if _, err := admin.Exec(ctx, create); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Main runs the tests of m and then stops the server pgtest started, if it
// started one. Use it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

// Stop stops a server started by pgtest and removes its files. It is safe to
// call when none was started.
func Stop() {
	if started == nil {
		return
	}
	started.stop()
	started = nil
}

func (in *instance) stop() {
	// SIGINT is PostgreSQL's fast shutdown: it ends sessions and exits.
	in.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { in.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		in.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(in.dir)
}

func setup() {
	if u := os.Getenv(EnvURL); u != "" {
		adminURL = u
		return
	}
	adminURL, started, startErr = start()
}

// binDir finds the directory holding initdb and postgres.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin: " +
		"install postgresql (apt-get install -y postgresql), or run `. .ci/postgres.sh` and keep " + EnvURL + " it exports")
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// start starts a throwaway server. Its tools run from its own directory: the
// test's may not be readable by the postgres user (a clone in a private
// home), and they would then print "could not change directory ...
// Permission denied".
func start() (string, *instance, error) {
	bin, err := binDir()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return "", nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as the postgres user.
		pu, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return "", nil, fmt.Errorf("running as root and there is no postgres user to run the server as: %v", err)
		}
		uid, _ := strconv.Atoi(pu.Uid)
		gid, _ := strconv.Atoi(pu.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--no-locale")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := initdb.CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "initdb.log"), out, 0o644); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	if cred != nil {
		os.Chown(logFile.Name(), int(cred.Uid), int(cred.Gid))
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig stops the server should the test binary die without Main.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGINT}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("start postgres: %v", err)
	}
	in := &instance{cmd: cmd, dir: dir}
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, u)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return u, in, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile.Name())
			in.stop()
			return "", nil, fmt.Errorf("postgres did not accept connections within 30s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(the configured URL)"
	}
	return u.Redacted()
}
