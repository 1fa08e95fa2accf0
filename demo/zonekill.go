package demo

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/directory"
	"github.com/shardwise/shardwise/logintoken"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/worldstore"
	"github.com/shardwise/shardwise/zone/zonehost"
)

// A zone node of the demo runs in this process, so the demo cannot kill it
// with a signal. It kills it the way a dead process looks to everything
// outside it, with four switches of the node's own, thrown together:
//
//   - etcd: the node reaches etcd through a proxy of its own (tcpproxy.Proxy),
//     cut at the kill: the node can neither renew nor revoke its lease,
//     nor resign as the failover controller, so its lease expires after
//     its TTL as a dead process's does, and that is what starts the
//     failover;
//   - its stores: the world store and the session directory it was given
//     answer it errKilled from the kill on (killable): a dead process
//     saves nothing on its way out and releases no session;
//   - its runtime's sessions are abandoned (zone.Runtime.AbandonSessions):
//     the leaves its gateway's shutdown hands the world are dropped, so a
//     player whose master another node simulates is neither saved nor
//     logged out there (zonehost.Host's orderly stop would do both), and stays
//     in the world for its client's resume to take over, as after a crash;
//   - its Host's context is cancelled: it stops ticking, its link closes
//     (its peers see the connections drop) and its gateway closes every
//     socket (GATEWAY.SHUTDOWN, where a dead process's would be cut: the
//     bots reconnect either way).

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
	zonehost.SharedDirectory
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
