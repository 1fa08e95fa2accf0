package demo

import (
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/internal/tcpproxy"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
)

// TestKillSwitches: a zone node's world store and directory answer it as
// usual until its switch is thrown, then refuse every call with errKilled
// (a dead process saves nothing and releases no session), while the
// stores themselves, shared with the other nodes, are untouched; its etcd
// proxy forwards until closed, then refuses new connections.
func TestKillSwitches(t *testing.T) {
	ctx := t.Context()
	var killed atomic.Bool
	world := worldstore.NewMemory(nil)
	dir, err := directory.NewMemory(directory.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w := killableWorld{world, killable{&killed}}
	d := killableDirectory{dir, killable{&killed}}
	p := worldstore.Player{Account: 7, Epoch: 1, Pos: torus.Pos{X: 1, Y: 2}}
	if err := w.SavePlayer(ctx, p); err != nil {
		t.Fatalf("save before the kill: %v", err)
	}
	s, _, err := d.Connect(ctx, 7, 3)
	if err != nil {
		t.Fatalf("connect before the kill: %v", err)
	}

	killed.Store(true)
	p.Epoch, p.Pos.X = 2, 5
	calls := map[string]error{
		"SavePlayer": w.SavePlayer(ctx, p),
		"LoadPlayer": func() error { _, err := w.LoadPlayer(ctx, 7); return err }(),
		"AppendEdit": func() error { _, err := w.AppendEdit(ctx, torus.ChunkPos{}, 0, worldstore.Edit{}); return err }(),
		"Edits":      func() error { _, _, err := w.Edits(ctx, torus.ChunkPos{}, 0); return err }(),
		"Connect":    func() error { _, _, err := d.Connect(ctx, 8, 3); return err }(),
		"Renew":      func() error { _, err := d.Renew(ctx, 7, s.Epoch); return err }(),
		"SetMaster":  func() error { _, err := d.SetMaster(ctx, 7, s.Epoch, directory.Route{Node: 3, Version: 1}); return err }(),
		"Lookup":     func() error { _, err := d.Lookup(ctx, 7); return err }(),
		"Release":    d.Release(ctx, 7, s.Epoch),
		"ClaimToken": d.ClaimToken(ctx, [16]byte{1}, time.Now().Add(time.Minute)),
	}
	for name, err := range calls {
		if !errors.Is(err, errKilled) {
			t.Errorf("%s after the kill: %v, want errKilled", name, err)
		}
	}
	// The shared stores still hold what the node left: the save before
	// the kill, the session it never released.
	if got, err := world.LoadPlayer(ctx, 7); err != nil || got.Epoch != 1 || got.Pos.X != 1 {
		t.Errorf("the shared world store holds %+v, %v: want the save from before the kill", got, err)
	}
	if got, err := dir.Lookup(ctx, account.ID(7)); err != nil || got.Epoch != s.Epoch {
		t.Errorf("the shared directory holds %+v, %v: want the session the node never released", got, err)
	}

	// The proxy: forwards, then refuses once closed.
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("etcd\n"))
			_ = c.Close()
		}
	}()
	px, err := tcpproxy.Start("http://" + up.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(px.Endpoint(), "http://")
	read := func() (string, error) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 5)
		n, err := c.Read(b)
		return string(b[:n]), err
	}
	if got, err := read(); got != "etcd\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	px.Cut()
	px.Cut() // idempotent: the kill closes it, then the end of the run
	if got, err := read(); err == nil && got != "" {
		t.Fatalf("through the closed proxy: %q: want refused", got)
	}
}
