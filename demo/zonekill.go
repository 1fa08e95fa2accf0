package demo

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone"
)

// A zone node of the demo runs in this process, so the demo cannot kill it
// with a signal. It kills it the way a dead process looks to everything
// outside it, with three switches of the node's own, thrown together:
//
//   - etcd: the node reaches etcd through a proxy of its own (etcdProxy),
//     cut at the kill: the node can neither renew nor revoke its lease,
//     nor resign as the failover controller, so its lease expires after
//     its TTL as a dead process's does, and that is what starts the
//     failover;
//   - its stores: the world store and the session directory it was given
//     answer it errKilled from the kill on (killable): a dead process
//     saves nothing on its way out and releases no session;
//   - its Host's context is cancelled: it stops ticking, its link closes
//     (its peers see the connections drop) and its gateway closes every
//     socket (GATEWAY.SHUTDOWN, where a dead process's would be cut: the
//     bots reconnect either way).
//
// What it still does that a dead process would not: its gateway's
// shutdown hands its sessions' leaves to its runtime for two more ticks
// (zone.Host's orderly stop), which forwards the leave of a player whose
// master another node simulates to that node; so such a player is saved
// there and logged out, where after a real crash it would stay in the
// world until its client reconnects and takes it over.

// errKilled is what a killed node's stores answer it.
var errKilled = errors.New("demo: this zone node was killed")

// killable wraps the world store and the directory one zone node is given,
// refusing every call once its switch is on.
type killable struct{ killed *atomic.Bool }

// killableWorld is a node's world store.
type killableWorld struct {
	worldstore.Store
	killable
}

func (w killableWorld) LoadPlayer(ctx context.Context, a account.ID) (worldstore.Player, error) {
	if w.killed.Load() {
		return worldstore.Player{}, errKilled
	}
	return w.Store.LoadPlayer(ctx, a)
}

func (w killableWorld) SavePlayer(ctx context.Context, p worldstore.Player) error {
	if w.killed.Load() {
		return errKilled
	}
	return w.Store.SavePlayer(ctx, p)
}

func (w killableWorld) AppendEdit(ctx context.Context, c torus.ChunkPos, expectRev uint64, e worldstore.Edit) (uint64, error) {
	if w.killed.Load() {
		return 0, errKilled
	}
	return w.Store.AppendEdit(ctx, c, expectRev, e)
}

func (w killableWorld) Edits(ctx context.Context, c torus.ChunkPos, sinceRev uint64) (uint64, []worldstore.RevEdit, error) {
	if w.killed.Load() {
		return 0, nil, errKilled
	}
	return w.Store.Edits(ctx, c, sinceRev)
}

// Close is the demo's: the store is shared by every node.
func (w killableWorld) Close() error { return nil }

// killableDirectory is a node's session directory. Methods a later
// directory.Directory adds pass through unswitched: give each its switch
// here (the resume credentials' ArmResume, Resume and RevokeResume, once
// merged), or a killed gateway could still arm or revoke one.
type killableDirectory struct {
	zone.SharedDirectory
	killable
}

func (d killableDirectory) Connect(ctx context.Context, a account.ID, gw directory.NodeID) (directory.Session, directory.Session, error) {
	if d.killed.Load() {
		return directory.Session{}, directory.Session{}, errKilled
	}
	return d.SharedDirectory.Connect(ctx, a, gw)
}

func (d killableDirectory) Renew(ctx context.Context, a account.ID, e directory.Epoch) (directory.Session, error) {
	if d.killed.Load() {
		return directory.Session{}, errKilled
	}
	return d.SharedDirectory.Renew(ctx, a, e)
}

func (d killableDirectory) SetMaster(ctx context.Context, a account.ID, e directory.Epoch, r directory.Route) (directory.Session, error) {
	if d.killed.Load() {
		return directory.Session{}, errKilled
	}
	return d.SharedDirectory.SetMaster(ctx, a, e, r)
}

func (d killableDirectory) Lookup(ctx context.Context, a account.ID) (directory.Session, error) {
	if d.killed.Load() {
		return directory.Session{}, errKilled
	}
	return d.SharedDirectory.Lookup(ctx, a)
}

func (d killableDirectory) Release(ctx context.Context, a account.ID, e directory.Epoch) error {
	if d.killed.Load() {
		return errKilled
	}
	return d.SharedDirectory.Release(ctx, a, e)
}

func (d killableDirectory) ClaimToken(ctx context.Context, id logintoken.ID, until time.Time) error {
	if d.killed.Load() {
		return errKilled
	}
	return d.SharedDirectory.ClaimToken(ctx, id, until)
}

// etcdProxy forwards one zone node's etcd connections on a free loopback
// port until cut, which closes every connection and refuses new ones.
type etcdProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	cut   bool
	wg    sync.WaitGroup
}

// startEtcdProxy starts a proxy to target ("http://host:port" or
// "host:port").
func startEtcdProxy(target string) (*etcdProxy, error) {
	if _, hp, ok := strings.Cut(target, "://"); ok {
		target = hp
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &etcdProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// endpoint is the proxy as an etcd client endpoint.
func (p *etcdProxy) endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *etcdProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		p.wg.Go(func() { pipe(c, up) })
		p.wg.Go(func() { pipe(up, c) })
	}
}

func (p *etcdProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// close cuts the proxy and waits for its goroutines. Idempotent: the kill
// cuts it, the end of the run closes every proxy.
func (p *etcdProxy) close() {
	p.mu.Lock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}
