package zone

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/handoff"
	"github.com/shardwise/shardwise/interest"
	"github.com/shardwise/shardwise/link/replication"
	"github.com/shardwise/shardwise/outbox"
	"github.com/shardwise/shardwise/replica"
	"github.com/shardwise/shardwise/torus"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

// firstEpoch is the replication epoch every entity carries until handoff
// raises it on each transfer.
const firstEpoch = 1

// kindResend is the inbox item Arrivals.Written leaves when the network
// refused a subscription message: its peer is sent every want again (at
// most once per Timers.Resend ticks).
const kindResend = 0xFFFFFFFF

// maxInbox bounds the messages waiting for the world goroutine; beyond it
// replication batches are dropped.
const maxInbox = 1 << 16

// replanPerTick bounds the chunks whose subscriptions a node re-plans in
// one tick after a table change.
const replanPerTick = 256

// inMsg is one message from a peer, queued by the transport (Arrivals)
// for the world goroutine.
type inMsg struct {
	from    string
	kind    uint32 // a wire.Kind*, or 0 for a replication batch
	payload []byte
	seq     uint64
	entries []replication.Entry
}

// cluster is the runtime's side of the node link: chunk subscriptions both
// ways, render ghosts, routing by account and remote intents. Everything
// but the inbox and the sender is owned by the world goroutine.
type cluster struct {
	r   *Runtime
	tr  Transport
	rep *replica.Store

	mu           sync.Mutex
	inbox        []inMsg
	inboxDropped int // replication batches dropped because the inbox was full

	// Observer side. held counts, per normalised chunk, the local
	// accounts holding it; wants is, per chunk this node receives, the
	// peers it subscribed to for it; changed collects chunks whose held
	// count crossed zero this tick.
	held    map[torus.ChunkPos]int32
	wants   map[torus.ChunkPos][]string
	changed map[torus.ChunkPos]struct{}
	subOut  map[string]*wire.Subscribe
	gaps    map[string]bool
	band    map[torus.ChunkPos]bool // foreign chunks in the interaction band
	// ents is the one table of per-entity protocol state (entity.go).
	ents entities
	// goneGhosts are the ghosts removed this tick: the vanish the
	// visibility index raises for them is not sent on to peers either.
	goneGhosts map[ecs.ID]struct{}
	// wasGhost are the entities adopted this tick that were ghosts here,
	// with the node subscribers that saw where the ghost stood when it was
	// adopted. An out-of-sight vanish for another node subscriber was
	// raised while it was still a ghost (its last update, before the
	// transfer, moved it out of that peer's chunks): this node never told
	// that peer of it, so it is not sent. One raised after the adoption,
	// for a peer that saw it, is.
	wasGhost map[ecs.ID][]Subscriber
	// handedSeen are, per entity adopted from a handoff this tick, the
	// node subscribers that hold the chunk it was handed over in but did
	// not observe a ghost of it here (wasGhost): they may hold a ghost of
	// it from its source, at the old epoch, which nothing else would ever
	// correct if it walks out of their sight before this node's first
	// flush of it (announceAdopted sends them its vanish).
	handedSeen map[ecs.ID][]Subscriber
	// parting are the entities destroyed or evicted this tick (or handed
	// over with no ghost kept), with the epoch and chunk they had: their
	// vanish goes out this tick under that epoch, naming that chunk.
	parting map[ecs.ID]parted
	// awaiting are the chunks this node asked a peer for whose snapshot
	// has not come yet: until it comes, the peer may not count this node
	// as an observer there.
	awaiting map[peerChunk]struct{}
	// resyncing are the chunks asked again of their sender after a gap in
	// its batches whose snapshot has not come yet, with the last tick it
	// is waited for (a gap loses moves: resyncNear).
	resyncing map[peerChunk]uint64
	// resyncExpiry is at most the least tick in resyncing (a bound, not
	// kept exact as entries go): drain sweeps the map only past it.
	resyncExpiry uint64
	// asked are the chunks peers subscribed to here whose first snapshot
	// has not gone yet (unanswered).
	asked  map[peerChunk]struct{}
	events []replica.Event
	// replicationFirst makes drain apply the queued replication batches
	// before the control messages (set only by tests: the two travel on
	// different streams, so either order can happen).
	replicationFirst bool
	table            uint64 // the table version wants were computed for
	// graceUntil is the last tick after a table change during which the
	// chunks' old simulators stay subscribed; 0 when none is running.
	graceUntil uint64
	// replan holds the chunks a re-plan of every chunk (a new table, the
	// grace's end) has still to do, replanPerTick a tick: a heap, so a
	// tick pops its share in chunk order without sorting them all.
	replan chunkHeap
	// announceTable asks the next control flush to send every peer a
	// message (full routes), so that they learn this node's table version.
	announceTable bool
	// peerTable is, per peer, the highest table version its fences named
	// under its current lease.
	peerTable map[string]uint64

	// Publisher side.
	leaseOf   map[string]int64     // peer name → the last lease accepted from it
	fenced    map[string]int64     // peers whose lease was lost → that lease
	resendAt  map[string]uint64    // peer → the tick before which wants are not resent again
	resendDue map[string]bool      // peers whose resend waits for resendAt
	resyncAt  map[resyncKey]uint64 // chunk held from a peer → the tick before which it is not resynced again
	numOf     map[string]uint64    // peer name → its node number
	nameOf    map[uint64]string
	sinks     map[string]*nodeSink
	snapshot  map[string][]torus.ChunkPos
	upd       updScratch // appendUpdates' per-call scratch, reused

	// Routing by account.
	local    map[account.ID]outbox.Sink
	routes   map[account.ID]string
	routeVer map[string]uint64
	fwd      map[string]*forwardBuf
	mine     map[account.ID]bool
	routeSet map[account.ID]bool // changes of mine since the last Routes: true set, false unset

	intentsOut map[string][]wire.Intent
	ifate      intentFate // intentfate.go

	// Handoff (handoff.go).
	toHand    []ecs.ID
	handTable *cells.Table // the table the handoff last checked every entity against
	adopted   []ecs.ID
	settle    []ecs.ID                    // adopted where their ghost was filed: reindex hooks at the end of the tick
	handedIn  map[torus.ChunkPos][]ecs.ID // the went records this node handed over, by chunk, for snapshots
	hstats    HandoffStats

	progMu   sync.Mutex
	progress Progress

	closed  bool // set by close, under the world goroutine
	closeMu sync.Once
	stats   ClusterStats

	// bugs are deliberately broken variants of the protocol, set only by
	// tests (export_test.go's Plant) to prove the simulation catches each.
	bugs plantedBugs

	// ckpt is the checkpoint stream and failover adoption (checkpoint.go).
	ckpt ckptState
}

// plantedBugs switch known bugs back on, for the test that requires the
// simulation to catch every one (zone/bite_test.go). Production code
// never sets them.
type plantedBugs struct {
	noFreeze       bool // an outgoing entity is not frozen when sent
	noEpochGuard   bool // a transfer older than the ghost's epoch is taken
	parkAsDrop     bool // parkChunk drops the ghosts like dropChunk
	noHeldVanish   bool // holdVanish never holds
	noUnlistedHold bool // holdUnlisted never holds
	adoptionVanish bool // the out-of-sight vanish raised in the adoption tick is sent to peers that never saw it here
	dropAtFence    bool // fencedPeers drops a dead peer's ghosts (they vanish, then come back adopted)
	noHeldEnd      bool // a snapshot that does not list a ghost held at a fence leaves it held
	snapAdopting   bool // a node answers a subscription while it adopts a dead node's entities
	noMoverWait    bool // notThere does not wait for a moved region's standby (fencehold.go's movers)
	fenceRetry     bool // an entity unfrozen at its dead target's fence waits HandoffRetry, not the next checkpoint
	noSourceResync bool // applySnapshot does not ask another source again for a ghost the chunk's owner left out
	noHandOnHold   bool // resolveHeld lets a vanish through from a sender that simulates nothing in the chunk it names
	noTakeRecheck  bool // holdUnlisted does not keep a handed entity's ghost that the taker's snapshot, maybe older than the take, leaves out
	noHandedVanish bool // announceAdopted sends no vanish to the nodes that hold the chunk of the handoff but not the entity's (handedSeen)
	wentUnanswered bool // a went record counts as having seen the entity a subscriber whose snapshot of its chunk is still to come (unanswered)
	noGapHold      bool // holdUnlisted does not keep a ghost its source's snapshot leaves out while that source's gap is resynced (resyncNear)
	// The intents lost at a failover before intentfate.go:
	// noUnconfirmed, those sent to a peer that then died unconfirmed are
	// not counted; noAwait, one for a fenced peer's entity is sent into
	// the void, uncounted.
	noUnconfirmed, noAwait bool
	// noHeir: an intent for a fenced peer's entity waits for a ghost or
	// the adoption here, never goes to the node whose adoption query
	// named the entity (intentfate.go's heirs).
	noHeir bool
	// noBandReplan: a new table's re-plan leaves out the band chunks
	// not received from anyone (their simulators fenced).
	noBandReplan bool
}

// ClusterStats are the runtime's link counters since New.
type ClusterStats struct {
	// Batches and Entries are replication batches and entries sent.
	Batches, Entries int
	// Snapshots counts chunk snapshots sent.
	Snapshots int
	// Forwards counts account-routed messages sent (one per peer per tick).
	Forwards int
	// Subscribes counts subscription messages sent.
	Subscribes int
	// IntentsSent counts intents sent to the node that simulates their
	// target (or forwarded after a handoff). IntentsDropped counts every
	// intent this node took (its module's, or a peer's) and did not
	// apply or send on, whatever the reason; the fields after it split
	// it by reason (intentfate.go), and sum to it.
	IntentsSent, IntentsDropped int
	// IntentsLapsed: no node known to simulate the target (destroyed,
	// or never here), or no intent handler.
	IntentsLapsed int
	// IntentsHoldFull: past the heldIntents (64) an entity may wait for,
	// frozen in a handoff or for its fenced owner's standby.
	IntentsHoldFull int
	// IntentsStale: addressed to a newer epoch than the copy here, a
	// stale owner (counted in Stale too).
	IntentsStale int
	// IntentsUnconfirmed: sent to a peer whose lease then ended (or that
	// came back under a new lease) before it confirmed taking them. The
	// peer may have applied some just before it died, its confirmation
	// lost with it: lost or not, none is applied twice.
	IntentsUnconfirmed int
	// IntentsUnadopted: held for an entity of a fenced peer (never sent
	// to it) that no live node brought back within Timers.FenceHold.
	IntentsUnadopted int
	// IntentsUnsent: the transport refused the message carrying them.
	IntentsUnsent int
	// IntentsAwaited counts the intents that waited for a fenced peer's
	// entity to come back (not dropped: delivered after, or counted in
	// IntentsUnadopted or IntentsHoldFull).
	IntentsAwaited int
	// IntentsToHeir counts the intents for a fenced peer's entity sent
	// to the live node whose adoption query named it (intentfate.go),
	// awaited first or not.
	IntentsToHeir int
	// IntentsAwaiting is how many intents wait now for a fenced peer's
	// entity to come back, IntentsHeld how many wait for a frozen entity
	// here or for the next tick, and IntentsInFlight how many sent to
	// live peers are not confirmed yet (gauges, not counts since New). A
	// node that dies loses them all: what it confirmed taking, the peers
	// no longer count.
	IntentsAwaiting, IntentsHeld, IntentsInFlight int
	// Stale counts updates and intents dropped for a stale epoch: an
	// update from a node that no longer simulates the entity, an intent
	// that names a newer epoch than the one this node simulates.
	Stale int
	// Gaps counts replication gaps seen (each triggers a resync).
	Gaps int
	// Refused counts messages refused as malformed or from a fenced sender.
	Refused int
	// SendErrors counts control messages the link did not take.
	SendErrors int
	// InboxDropped counts replication batches dropped because the world
	// did not drain its inbox (more than 65,536 messages waiting).
	InboxDropped int
	// VanishesHeld counts vanishes held back because they named a chunk
	// this node holds but did not yet receive from the sender (see the
	// package doc, render ghosts); VanishesHeldApplied those of them
	// applied after all (after the re-plan this node did not await the
	// sender's snapshot of the chunk, or the sender was not a simulator
	// there, or 20 ticks passed).
	VanishesHeld, VanishesHeldApplied int
	// PhaseErrors counts the protocol's per-entity transitions refused
	// because the entity's record was in a phase the transition does not
	// leave (a protocol bug; each is logged, and CheckInvariants reports
	// the first as invariant 14).
	PhaseErrors int
	// FenceHeld counts ghosts held at their source's fence (fencehold.go);
	// FenceHeldVanished those of them that vanished after all (nobody
	// sent them at a higher epoch within Timers.FenceHold, or this node
	// stopped holding their chunk).
	FenceHeld, FenceHeldVanished int
	// FenceHeldUnlisted counts the held ghosts that ended because every
	// simulator of their chunk sent it without them after the failover
	// (fencehold.go).
	FenceHeldUnlisted int
}

// Progress counts what a node sent to and received from each peer, for a
// harness that waits until every message sent has arrived
// (zonetest.Cluster.Sync).
type Progress struct {
	// Queued and Written count control messages handed to the transport
	// and handed by it to the network (taken or refused: Arrivals.Written).
	Queued, Written uint64
	// Sent and Received are per peer.
	Sent, Received map[string]PeerProgress
}

// PeerProgress is one direction of traffic with one peer.
type PeerProgress struct {
	Control uint64 // control messages the link took (sent) or delivered (received)
	Seq     uint64 // the last replication batch's link sequence
}

func (c *cluster) bump(f func(p *Progress)) {
	c.progMu.Lock()
	if c.progress.Sent == nil {
		c.progress.Sent = make(map[string]PeerProgress)
		c.progress.Received = make(map[string]PeerProgress)
	}
	f(&c.progress)
	c.progMu.Unlock()
}

// Progress returns a copy of the link progress counters (zero for a node
// alone). Safe for concurrent use.
func (r *Runtime) Progress() Progress {
	if r.cluster == nil {
		return Progress{}
	}
	c := r.cluster
	c.progMu.Lock()
	defer c.progMu.Unlock()
	p := Progress{Queued: c.progress.Queued, Written: c.progress.Written,
		Sent: make(map[string]PeerProgress), Received: make(map[string]PeerProgress)}
	for k, v := range c.progress.Sent {
		p.Sent[k] = v
	}
	for k, v := range c.progress.Received {
		p.Received[k] = v
	}
	return p
}

// nodeSink collects one peer's frames of a flush.
type nodeSink struct{ frames [][]byte }

func (s *nodeSink) Deliver(_ uint64, frames [][]byte) { s.frames = append(s.frames, frames...) }

// forwardBuf collects the frames of a flush for the accounts routed to one
// peer.
type forwardBuf struct {
	msg   wire.Forward
	index map[*byte]uint32 // first byte of a frame → its index in msg.Frames
}

// fwdSink is the outbox sink of an account routed to another node.
type fwdSink struct {
	c    *cluster
	peer string
	acct account.ID
}

func (s fwdSink) Deliver(_ uint64, frames [][]byte) {
	b := s.c.fwd[s.peer]
	if b == nil {
		b = &forwardBuf{index: make(map[*byte]uint32)}
		s.c.fwd[s.peer] = b
	}
	af := wire.AccountFrames{Account: s.acct, Frames: make([]uint32, 0, len(frames))}
	for _, f := range frames {
		if len(f) == 0 {
			continue
		}
		i, ok := b.index[&f[0]]
		if !ok {
			i = uint32(len(b.msg.Frames))
			b.index[&f[0]] = i
			b.msg.Frames = append(b.msg.Frames, f)
		}
		af.Frames = append(af.Frames, i)
	}
	b.msg.Accounts = append(b.msg.Accounts, af)
}

func newCluster(r *Runtime, tr Transport) (*cluster, error) {
	rep, err := replica.New(replica.Config{World: r.geo})
	if err != nil {
		return nil, err
	}
	c := &cluster{
		r: r, tr: tr, rep: rep,
		held:       make(map[torus.ChunkPos]int32),
		wants:      make(map[torus.ChunkPos][]string),
		changed:    make(map[torus.ChunkPos]struct{}),
		subOut:     make(map[string]*wire.Subscribe),
		gaps:       make(map[string]bool),
		ents:       newEntities(),
		band:       make(map[torus.ChunkPos]bool),
		goneGhosts: make(map[ecs.ID]struct{}),
		wasGhost:   make(map[ecs.ID][]Subscriber),
		handedSeen: make(map[ecs.ID][]Subscriber),
		parting:    make(map[ecs.ID]parted),
		awaiting:   make(map[peerChunk]struct{}),
		resyncing:  make(map[peerChunk]uint64),
		asked:      make(map[peerChunk]struct{}),
		leaseOf:    make(map[string]int64),
		fenced:     make(map[string]int64),
		resendAt:   make(map[string]uint64),
		resendDue:  make(map[string]bool),
		resyncAt:   make(map[resyncKey]uint64),
		numOf:      make(map[string]uint64),
		nameOf:     make(map[uint64]string),
		sinks:      make(map[string]*nodeSink),
		snapshot:   make(map[string][]torus.ChunkPos),
		local:      make(map[account.ID]outbox.Sink),
		routes:     make(map[account.ID]string),
		routeVer:   make(map[string]uint64),
		fwd:        make(map[string]*forwardBuf),
		mine:       make(map[account.ID]bool),
		routeSet:   make(map[account.ID]bool),
		intentsOut: make(map[string][]wire.Intent),
		handedIn:   make(map[torus.ChunkPos][]ecs.ID),
		peerTable:  make(map[string]uint64),
		ckpt:       newCkptState(),
	}
	r.subs.AddHooks(interest.Hooks[Subscriber]{ChunkSent: c.chunkSent, ChunkUnsent: c.chunkUnsent})
	tr.Open(arrivals{c})
	return c, nil
}

func (c *cluster) enqueue(m inMsg) {
	c.mu.Lock()
	if m.kind == 0 && len(c.inbox) >= maxInbox {
		// The world is not draining (a stalled or fenced node): a
		// replication batch is dropped, which its receiver will see as a
		// gap in the link's numbering and repair by a resync. Control
		// messages are few and never dropped.
		c.inboxDropped++
		c.mu.Unlock()
		return
	}
	c.inbox = append(c.inbox, m)
	c.mu.Unlock()
	c.bump(func(p *Progress) {
		r := p.Received[m.from]
		if m.kind == 0 {
			r.Seq = max(r.Seq, m.seq)
		} else {
			r.Control++
		}
		p.Received[m.from] = r
	})
}

// arrivals is the cluster's Arrivals: it queues into the inbox, for the
// world goroutine's next drain.
type arrivals struct{ c *cluster }

func (a arrivals) Control(from string, kind uint32, payload []byte) {
	a.c.enqueue(inMsg{from: from, kind: kind, payload: payload})
}

func (a arrivals) Replication(from string, seq uint64, entries []replication.Entry) {
	a.c.enqueue(inMsg{from: from, seq: seq, entries: entries})
}

// Written counts a control message the transport handed to the network;
// a subscription not taken (a peer the link does not know yet, a closing
// link) leaves a resend in the inbox: the world sends its wants again.
func (a arrivals) Written(peer string, kind uint32, err error) {
	c := a.c
	c.bump(func(p *Progress) {
		p.Written++
		if err == nil {
			s := p.Sent[peer]
			s.Control++
			p.Sent[peer] = s
		}
	})
	if err == nil {
		return
	}
	c.r.cfg.Logger.Warn("zone: control message not sent", "peer", peer, "kind", kind, "err", err)
	if kind == wire.KindSubscribe {
		c.mu.Lock()
		c.inbox = append(c.inbox, inMsg{from: peer, kind: kindResend})
		c.mu.Unlock()
	}
	if kind == KindCheckpoint {
		c.mu.Lock()
		c.inbox = append(c.inbox, inMsg{from: peer, kind: kindCkptResend})
		c.mu.Unlock()
	}
}

// close closes the transport (which joins what it started).
func (c *cluster) close() {
	c.closeMu.Do(func() {
		c.closed = true
		_ = c.tr.Close()
	})
}

// fence is what every message carries. Its table version is the one the
// node's column hooks follow (columnsAt), which is the held table's once a
// tick's residency commit has applied it: a peer that reads version v in a
// fence knows this node has torn down the columns v took from it
// (Runtime.columnsReleased) and holds the table v (a handoff waits for
// it).
func (c *cluster) fence() wire.Fence {
	return wire.Fence{Node: uint64(c.r.cfg.Node), Lease: c.r.lease(), Table: c.r.columnsAt}
}

// queue hands a control message to the transport, which never blocks
// the world: one it refuses (LinkTransport: the peer's queue is full) is
// dropped and counted, and a subscription dropped here is sent again
// (resendWants).
func (c *cluster) queue(peer string, kind uint32, payload []byte) {
	if c.closed {
		return
	}
	if err := c.tr.Send(peer, kind, payload); err != nil {
		c.stats.SendErrors++
		if kind == wire.KindSubscribe {
			c.resendDue[peer] = true
		}
		return
	}
	c.bump(func(p *Progress) { p.Queued++ })
}

// ---- observer side ----

func (c *cluster) chunkSent(s Subscriber, ch torus.ChunkPos) {
	if s.Kind != interest.AccountSubscriber {
		return
	}
	ch = c.r.geo.NormaliseChunk(ch)
	n := c.held[ch] + 1
	c.held[ch] = n
	if n == 1 {
		c.changed[ch] = struct{}{}
	}
}

func (c *cluster) chunkUnsent(s Subscriber, ch torus.ChunkPos) {
	if s.Kind != interest.AccountSubscriber {
		return
	}
	ch = c.r.geo.NormaliseChunk(ch)
	n := c.held[ch] - 1
	if n <= 0 {
		delete(c.held, ch)
		c.changed[ch] = struct{}{}
		return
	}
	c.held[ch] = n
}

// simulators appends the peers that may simulate an entity standing in
// ch: the chunk's owner and every node owning a region within the handoff
// margin of it (an entity past a border, not yet handed over, is still
// simulated by its old node: observers pull it from there too).
func (c *cluster) simulators(dst []string, ch torus.ChunkPos) []string {
	t := c.r.terr.Table()
	edge := c.r.geo.ChunkEdge()
	o := c.r.geo.ChunkOrigin(ch)
	centre := torus.Pos{X: o.X + edge/2, Y: o.Y + edge/2}
	n := len(dst)
	dst = t.AppendOwnersWithin(dst, centre, c.r.cfg.Bands.HandoffMargin+edge*0.7072, c.r.cfg.Name)
	// A peer that lost its lease is asked for nothing until it is back.
	kept := slices.DeleteFunc(dst[n:], func(p string) bool { _, f := c.fenced[p]; return f })
	dst = dst[:n+len(kept)]
	slices.Sort(dst)
	return dst
}

// updateWants turns this tick's changes of held chunks (and a new table)
// into subscription changes per peer.
func (c *cluster) updateWants() {
	tick := c.r.w.CurrentTick().N
	queued := false // a re-plan queued this tick
	if c.graceUntil != 0 && tick > c.graceUntil {
		// The grace after a table change is over: the old simulators of
		// each chunk are dropped now (they handed their entities over).
		c.graceUntil = 0
		c.replanAll(nil)
		queued = true
	}
	if v := c.r.terr.Table().Version(); v != c.table {
		first := c.table == 0
		c.table = v
		c.announceTable = true
		band := c.bandChanged(c.computeBand())
		if first {
			for ch := range c.held {
				c.changed[ch] = struct{}{}
			}
			for ch := range c.wants {
				c.changed[ch] = struct{}{}
			}
			for _, ch := range band {
				c.changed[ch] = struct{}{}
			}
		} else {
			c.graceUntil = tick + ticks(c.r.cfg.Timers.TableGrace)
			c.replanAll(band)
			queued = true
		}
	}
	if len(c.changed) == 0 && len(c.replan) == 0 {
		return
	}
	chunks := make([]torus.ChunkPos, 0, len(c.changed)+min(len(c.replan), replanPerTick))
	for ch := range c.changed {
		chunks = append(chunks, ch)
	}
	clear(c.changed)
	// A new table changes every chunk at once: re-plan a share per tick
	// (the rest waits in the heap), so that no tick, here or at the peers
	// answering the subscriptions, carries it all. The old simulators stay
	// subscribed meanwhile (the grace). Chunks whose holders changed are
	// re-planned at once, as outside a re-plan. The tick that queues a
	// re-plan (the new table's: the band, the heap, and in the runtime the
	// columns that changed hands) leaves its first share to the next.
	for n := 0; !queued && n < replanPerTick && len(c.replan) > 0; n++ {
		chunks = append(chunks, c.replan.pop())
	}
	slices.SortFunc(chunks, cmpChunk)
	chunks = slices.Compact(chunks)
	var now []string
	for _, ch := range chunks {
		before := c.wants[ch]
		now = now[:0]
		if c.held[ch] > 0 || c.band[ch] {
			now = c.simulators(now, ch)
			if c.graceUntil != 0 {
				// A region move in progress: the old owner still simulates
				// what it has not handed over yet, so it stays subscribed
				// (dropping it would make its ghosts blink).
				for _, p := range before {
					if _, fenced := c.fenced[p]; !fenced && !slices.Contains(now, p) {
						now = append(now, p)
					}
				}
				slices.Sort(now)
			}
		}
		for _, p := range before {
			if !slices.Contains(now, p) {
				c.sub(p).Remove = append(c.sub(p).Remove, ch)
				delete(c.awaiting, peerChunk{p, ch})
				if c.needs(ch) || c.bugs.parkAsDrop {
					c.dropChunk(p, ch)
				} else {
					c.parkChunk(p, ch)
				}
			}
		}
		for _, p := range now {
			if !slices.Contains(before, p) {
				c.addSub(p, ch)
			}
		}
		if len(now) == 0 {
			delete(c.wants, ch)
		} else {
			c.wants[ch] = slices.Clone(now)
		}
	}
}

// replanAll queues every chunk this node receives, holds or has in its
// band, and extra, for a re-plan spread over ticks (replanPerTick a
// tick). Re-planning a chunk twice changes nothing the second time, so a
// chunk queued twice costs only time.
func (c *cluster) replanAll(extra []torus.ChunkPos) {
	for ch := range c.held {
		c.replan = append(c.replan, ch)
	}
	for ch := range c.wants {
		c.replan = append(c.replan, ch)
	}
	// The band too: a band chunk whose simulators were all fenced has
	// no wants left (fencedPeers), and one that stays in the band is
	// not in extra; the new table may name a live simulator of it (the
	// dead one's adopter). (Not those queued already: a duplicate takes
	// a share of replanPerTick.)
	if !c.bugs.noBandReplan {
		queued := make(map[torus.ChunkPos]bool, len(extra))
		for _, ch := range extra {
			queued[ch] = true
		}
		for ch := range c.band {
			if _, wanted := c.wants[ch]; !wanted && c.held[ch] == 0 && !queued[ch] {
				c.replan = append(c.replan, ch)
			}
		}
	}
	c.replan = append(c.replan, extra...)
	c.replan.init()
}

// chunkHeap is a min-heap of chunks in cmpChunk order.
type chunkHeap []torus.ChunkPos

func (h chunkHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h chunkHeap) down(i int) {
	for {
		m := 2*i + 1
		if m >= len(h) {
			return
		}
		if r := m + 1; r < len(h) && cmpChunk(h[r], h[m]) < 0 {
			m = r
		}
		if cmpChunk(h[m], h[i]) >= 0 {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// pop removes and returns the least chunk; h must not be empty.
func (h *chunkHeap) pop() torus.ChunkPos {
	old := *h
	n := len(old) - 1
	top := old[0]
	old[0] = old[n]
	*h = old[:n]
	h.down(0)
	return top
}

// peerChunk is a chunk as received from one peer.
type peerChunk struct {
	peer  string
	chunk torus.ChunkPos
}

// addSub asks peer for ch, and awaits its snapshot.
func (c *cluster) addSub(peer string, ch torus.ChunkPos) {
	c.sub(peer).Add = append(c.sub(peer).Add, ch)
	c.awaiting[peerChunk{peer, c.r.geo.NormaliseChunk(ch)}] = struct{}{}
}

// answered reports whether this node receives ch from peer and has had
// its snapshot: the peer counts this node as an observer there.
func (c *cluster) answered(peer string, ch torus.ChunkPos) bool {
	ch = c.r.geo.NormaliseChunk(ch)
	_, waiting := c.awaiting[peerChunk{peer, ch}]
	return c.wanted(peer, ch) && !waiting
}

func (c *cluster) sub(peer string) *wire.Subscribe {
	s := c.subOut[peer]
	if s == nil {
		s = &wire.Subscribe{}
		c.subOut[peer] = s
	}
	return s
}

// dropChunk forgets the ghosts of ch that came from peer.
func (c *cluster) dropChunk(peer string, ch torus.ChunkPos) {
	var gone []uint64
	for _, e := range c.rep.AppendResidents(nil, ch) {
		if src, _ := c.sourceOf(ecs.ID(e)); src == peer {
			gone = append(gone, e)
		}
	}
	if len(gone) == 0 {
		return
	}
	// Keep the other sources' ghosts: a snapshot of the chunk listing
	// exactly them.
	keep := c.asIs(nil, ch, func(e uint64) bool { return !slices.Contains(gone, e) })
	_ = c.rep.Replace(ch, keep)
	c.applyEvents()
}

// parkedGhost is a parked ghost's source and the last tick it is kept.
type parkedGhost struct {
	peer  string
	until uint64
}

// isFenced reports whether peer's lease was seen lost.
func (c *cluster) isFenced(peer string) bool {
	_, f := c.fenced[peer]
	return f
}

// parkChunk is dropChunk for a chunk this node no longer holds at all:
// the ghosts that came from peer stay, unseen, for Timers.Park ticks. Until the
// peer takes in the unsubscribe it counts this node as seeing them, so
// one that walks on into a chunk this node still receives from the peer
// comes as a delta, not an appear; with its ghost dropped, that delta was
// an orphan, and the entity stayed out of sight until a snapshot of the
// chunk repaired it (2-4 ticks). sweepParked drops the rest.
func (c *cluster) parkChunk(peer string, ch torus.ChunkPos) {
	until := c.r.w.CurrentTick().N + ticks(c.r.cfg.Timers.Park)
	for _, e := range c.rep.AppendResidents(nil, ch) {
		if src, _ := c.sourceOf(ecs.ID(e)); src == peer {
			c.park(ecs.ID(e), peer, until)
		}
	}
}

// sweepParked ends the parking of ghosts that moved into a chunk this
// node receives from their source (or whose chunk it receives again, or
// that were replaced or removed meanwhile), and drops those whose time is
// up, whose source lost its lease (it says nothing more), or whose chunk
// this node holds again but does not receive from their source (a client
// here would see them).
func (c *cluster) sweepParked() {
	if len(c.ents.parked) == 0 {
		return
	}
	tick := c.r.w.CurrentTick().N
	for _, id := range sortedIDs(c.ents.parked) {
		e := c.ents.parked[id]
		if e == nil {
			continue // dropped by a Replace earlier in this sweep
		}
		pg := *e.park
		_, filed, ok := c.rep.Has(uint64(id))
		switch {
		case !ok || e.source != pg.peer || c.wanted(pg.peer, filed):
			c.unpark(e)
		case tick > pg.until || c.isFenced(pg.peer) || c.needs(filed):
			c.unpark(e)
			_ = c.rep.Replace(filed, c.asIs(nil, filed, func(e uint64) bool { return e != uint64(id) }))
		}
	}
	c.applyEvents()
}

// asIs appends the ghosts of ch that keep accepts as snapshot entries of
// their state as it is (their stamps unchanged), for a Replace that moves
// or drops some ghosts and leaves the others alone.
func (c *cluster) asIs(dst []replica.Update, ch torus.ChunkPos, keep func(uint64) bool) []replica.Update {
	for _, e := range c.rep.AppendResidents(nil, ch) {
		if !keep(e) {
			continue
		}
		st, _, _ := c.rep.Has(e)
		burst, _ := c.rep.AppendBurst(nil, e)
		dst = append(dst, replica.Update{Entity: e, Stamp: st, Frames: burst})
	}
	return dst
}

// parted is what an entity gone this tick had: its epoch and chunk.
type parted struct {
	epoch uint64
	chunk torus.ChunkPos
}

// part records what id had, for its vanish this tick; call it before its
// epoch and its index entry go.
func (c *cluster) part(id ecs.ID) {
	ch, _ := c.r.vis.ChunkOf(id)
	c.parting[id] = parted{epoch: c.epochOf(id), chunk: ch}
}

// heldVanish is a vanish held back (holdVanish): from whom, into which
// chunk, the ghost's stamp when it was held, the vanish's own, and the
// last tick it may wait.
type heldVanish struct {
	peer      string
	chunk     torus.ChunkPos
	at, stamp replica.Stamp
	until     uint64
	// unlisted: no vanish came; the sender's snapshot of chunk (where the
	// ghost stands) left it out, while a neighbouring chunk's snapshot
	// is still to come from the sender (holdUnlisted).
	unlisted bool
	// beforeTake: the sender is the entity's new owner, this node handed
	// it over, and nothing of it at the new epoch has come yet: the
	// snapshot may have been taken before the take (holdUnlisted); the
	// chunk's snapshot asked for again says.
	beforeTake bool
}

// holdVanish holds back a vanish that says a ghost went out of sight into
// a chunk this node holds, for its clients or its band, but does not yet
// receive from the sender. That happens after a table change, while the
// re-plan of this node's subscriptions is spread over ticks or this node
// lags: the new owner of a region counts this node as an observer only
// of the chunks it subscribed to, and an entity it was handed walks on
// into one it did not. The entity stays in this node's sight: the ghost
// moves into that chunk as it is, the chunk is re-planned this tick, and
// the sender's snapshot of it brings the entity's state (or drops it).
// Without this, every client here would see the entity blink. resolveHeld
// lets the vanish through when no snapshot is coming.
func (c *cluster) holdVanish(from string, id ecs.ID, ch torus.ChunkPos, stamp replica.Stamp) bool {
	if c.bugs.noHeldVanish {
		return false
	}
	ch = c.r.geo.NormaliseChunk(ch)
	at, filed, ok := c.rep.Has(uint64(id))
	// From the ghost's source, or from its new owner (a higher epoch: it
	// was handed over, and walked on before this node received it from
	// there); a walk into the next chunk, not a jump.
	if src, _ := c.sourceOf(id); !ok || src != from && at.Epoch >= stamp.Epoch || !at.Before(stamp) || !c.needs(ch) || c.r.geo.ChunkDistance(filed, ch) > 1 {
		return false
	}
	if c.answered(from, ch) {
		return false // the sender counts this node as an observer there: it is gone (a despawn)
	}
	if filed != ch {
		moved := c.asIs(nil, ch, func(uint64) bool { return true })
		burst, _ := c.rep.AppendBurst(nil, uint64(id))
		moved = append(moved, replica.Update{Entity: uint64(id), Stamp: at, Frames: burst})
		if c.rep.Replace(ch, moved) != nil {
			return false
		}
	}
	if !c.holdVanishOf(id, heldVanish{peer: from, chunk: ch, at: at, stamp: stamp, until: c.r.w.CurrentTick().N + ticks(c.r.cfg.Timers.Hold)}) {
		return false
	}
	c.stats.VanishesHeld++
	c.changed[ch] = struct{}{}
	return true
}

// holdUnlisted keeps a ghost that sender's snapshot of ch, where the
// ghost stands, leaves out, while this node needs a neighbouring chunk it
// has not had sender's snapshot of yet. That happens in a region move:
// the old owner keeps a ghost of what it handed over where it stood, but
// re-plans its subscriptions to the new owner a share per tick, so the
// new owner does not count it as an observer yet and does not tell it
// that the entity walked on into the next chunk; the snapshot of the
// chunk the entity left then comes before the next chunk's, which lists
// it. Removing the ghost at the first snapshot made every client here see
// the entity blink (zonesim seeds 98, 122, 192). The ghost stays as it
// is, those chunks are re-planned this tick, and resolveHeld removes it
// only once no snapshot from sender that could list it is awaited (or
// Timers.Hold ticks passed): a snapshot or an update that moves it ends
// the hold.
//
// It also keeps, once, the ghost this node made of an entity it handed
// to sender when the ack came, while nothing of it at the new epoch has
// come from sender: the replication stream is not ordered with the
// control stream, and a snapshot sender took before it took the entity
// can arrive after the ack (its later snapshots and the appear lost:
// zonesim heavy loss seed 18, a blink). The chunk is asked for again;
// sender's answer, taken after the take, lists the entity or not.
func (c *cluster) holdUnlisted(from string, id ecs.ID, ch torus.ChunkPos) bool {
	if src, _ := c.sourceOf(id); c.bugs.noUnlistedHold || src != from {
		return false
	}
	at, filed, ok := c.rep.Has(uint64(id))
	if !ok || filed != ch {
		return false
	}
	h := heldVanish{peer: from, chunk: ch, at: at, until: c.r.w.CurrentTick().N + ticks(c.r.cfg.Timers.Hold), unlisted: true}
	if e := c.ents.recs[id]; e != nil && e.went != nil && e.went.handed && e.went.peer == from && at.Epoch < e.went.epoch &&
		!e.went.rechecked && !c.bugs.noTakeRecheck {
		if !c.holdVanishOf(id, heldVanish{peer: from, chunk: ch, at: at, until: h.until, unlisted: true, beforeTake: true}) {
			return false
		}
		e.went.rechecked = true
		c.awaiting[peerChunk{from, ch}] = struct{}{}
		c.sub(from).Resync = append(c.sub(from).Resync, ch)
		c.stats.VanishesHeld++
		return true
	}
	if pending := c.pendingNear(from, ch); !pending && !c.resyncNear(from, ch) || !c.holdVanishOf(id, h) {
		return false
	}
	c.stats.VanishesHeld++
	return true
}

// resyncNear reports whether this node needs a chunk next to ch that it
// receives from peer and has asked peer for again after a gap in its
// batches (or will, at the end of this drain), with no snapshot come yet.
// The lost batches may have moved a ghost of peer's out of ch into that
// chunk: a snapshot of ch that leaves it out does not say it is gone
// (zonesim's crowd at a four-way corner, seed 18: a ghost whose move into
// the next chunk was lost removed by its source's snapshot of the chunk
// it left, a vanish two chunks from a client's viewer; the next chunk's
// snapshot listed it a tick later).
func (c *cluster) resyncNear(peer string, ch torus.ChunkPos) bool {
	if c.bugs.noGapHold || !c.gaps[peer] && len(c.resyncing) == 0 {
		return false
	}
	tick := c.r.w.CurrentTick().N
	for _, n := range c.neighbours(ch) {
		if !c.needs(n) || !c.wanted(peer, n) {
			continue
		}
		if until, ok := c.resyncing[peerChunk{peer, n}]; c.gaps[peer] || ok && tick <= until {
			return true
		}
	}
	return false
}

// pendingNear reports whether this node needs a chunk next to ch that it
// has not had peer's snapshot of yet, with peer a simulator there, and
// queues each such chunk for a re-plan this tick (the re-plan after a
// table change may not have reached it).
func (c *cluster) pendingNear(peer string, ch torus.ChunkPos) bool {
	found := false
	var sims []string
	for _, n := range c.neighbours(ch) {
		if !c.needs(n) || c.answered(peer, n) {
			continue
		}
		if sims = c.simulators(sims[:0], n); !slices.Contains(sims, peer) {
			continue
		}
		if !c.wanted(peer, n) {
			c.changed[n] = struct{}{}
		}
		found = true
	}
	return found
}

// awaitingNear reports whether this node still awaits peer's snapshot of
// a chunk next to ch that it asked peer for, with peer a simulator there.
func (c *cluster) awaitingNear(peer string, ch torus.ChunkPos) bool {
	var sims []string
	for _, n := range c.neighbours(ch) {
		if _, waiting := c.awaiting[peerChunk{peer, n}]; waiting && c.wanted(peer, n) {
			if sims = c.simulators(sims[:0], n); slices.Contains(sims, peer) {
				return true
			}
		}
	}
	return false
}

// isAwaiting reports whether this node awaits peer's snapshot of ch.
func (c *cluster) isAwaiting(peer string, ch torus.ChunkPos) bool {
	_, ok := c.awaiting[peerChunk{peer, ch}]
	return ok && c.wanted(peer, ch)
}

// neighbours returns the chunks next to ch (its own slab and the two
// beside it), normalised.
func (c *cluster) neighbours(ch torus.ChunkPos) []torus.ChunkPos {
	out := make([]torus.ChunkPos, 0, 26)
	for dz := int32(-1); dz <= 1; dz++ {
		for dy := int32(-1); dy <= 1; dy++ {
			for dx := int32(-1); dx <= 1; dx++ {
				if dx != 0 || dy != 0 || dz != 0 {
					out = append(out, c.r.geo.NormaliseChunk(torus.ChunkPos{X: ch.X + dx, Y: ch.Y + dy, Slab: ch.Slab + dz}))
				}
			}
		}
	}
	return out
}

// resolveHeld settles the held vanishes after this tick's re-plan: one
// whose ghost changed since (a snapshot or an update came) is done; one
// whose chunk this node is not awaiting from the sender after all (not
// asked for, or answered without it), or that waited Timers.Hold ticks, is
// applied now.
func (c *cluster) resolveHeld() {
	if len(c.ents.held) == 0 {
		return
	}
	tick := c.r.w.CurrentTick().N
	var sims []string
	for _, id := range sortedIDs(c.ents.held) {
		e := c.ents.held[id]
		if e == nil {
			continue // dropped by a Replace earlier in this pass
		}
		h := *e.held
		st, filed, ok := c.rep.Has(uint64(id))
		if !ok || st != h.at || filed != h.chunk || e.source != h.peer {
			c.unhold(e)
			continue
		}
		if h.unlisted {
			if tick <= h.until && (c.awaitingNear(h.peer, h.chunk) || c.resyncNear(h.peer, h.chunk) || h.beforeTake && c.isAwaiting(h.peer, h.chunk)) {
				continue
			}
			c.unhold(e)
			c.stats.VanishesHeldApplied++
			_ = c.rep.Replace(filed, c.asIs(nil, filed, func(e uint64) bool { return e != uint64(id) }))
			continue
		}
		sims = c.simulators(sims[:0], h.chunk)
		_, waiting := c.awaiting[peerChunk{h.peer, h.chunk}]
		if tick <= h.until && waiting && c.wanted(h.peer, h.chunk) && slices.Contains(sims, h.peer) {
			continue
		}
		if tick <= h.until && len(sims) > 0 && !slices.Contains(sims, h.peer) && !c.bugs.noHandOnHold {
			// The sender simulates nothing there: it hands the entity on
			// to the chunk's simulators, which this node receives the
			// chunk from (a failover's standby that adopted it in a
			// region a move in flight took from the dead node). Their
			// higher epoch takes the ghost over; without the wait the
			// clients here saw it vanish, then appear (zonesim
			// heavy-fourways seed 46).
			continue
		}
		c.unhold(e)
		c.stats.VanishesHeldApplied++
		_, _ = c.rep.Apply(replica.Update{Entity: uint64(id), Stamp: h.stamp, Chunk: h.chunk,
			Frames: outbox.AppendVanishFrame(nil, uint64(id), interest.OutOfSight)})
	}
	c.applyEvents()
}

// needs reports whether this node holds ch for its clients or its band:
// it receives the chunk from every node that may simulate there, or will
// once its subscriptions are re-planned.
func (c *cluster) needs(ch torus.ChunkPos) bool {
	ch = c.r.geo.NormaliseChunk(ch)
	return c.held[ch] > 0 || c.band[ch]
}

// wanted reports whether this node receives ch from peer.
func (c *cluster) wanted(peer string, ch torus.ChunkPos) bool {
	return slices.Contains(c.wants[c.r.geo.NormaliseChunk(ch)], peer)
}

// receive applies one replication batch.
func (c *cluster) receive(m inMsg) {
	if err := c.rep.Batch(m.from, m.seq); err != nil {
		c.stats.Gaps++
		c.gaps[m.from] = true
	}
	entries := m.entries
	if len(entries) == 0 || entries[0].Kind != wire.EntryFence {
		c.stats.Refused++
		return
	}
	f, err := wire.DecodeFence(entries[0].Payload)
	if err != nil || !c.r.accept(m.from, f) {
		c.stats.Refused++
		return
	}
	for _, e := range entries[1:] {
		switch e.Kind {
		case wire.EntryUpdate:
			u, err := wire.DecodeUpdate(e.Payload)
			if err != nil {
				c.stats.Refused++
				continue
			}
			c.applyUpdate(m.from, e, u)
		case wire.EntrySnapshot:
			s, err := wire.DecodeSnapshot(e.Payload)
			if err != nil {
				c.stats.Refused++
				continue
			}
			c.applySnapshot(m.from, s, f.Table)
		default:
			c.stats.Refused++
		}
	}
	c.applyEvents()
}

func (c *cluster) applyUpdate(from string, e replication.Entry, u wire.Update) {
	id := ecs.ID(e.Entity)
	if c.r.w.Alive(id) && !c.r.ghost.Has(id) {
		// This node holds it: simulated, or frozen in a handoff whose
		// answer is not in yet. The target's first updates can overtake
		// its ack (they travel on different streams): they are kept and
		// applied once the ack makes the entity a ghost here. No other
		// update applies; one of an older epoch comes from a former owner.
		if o := c.outgoingOf(id); o != nil && o.target == from && e.Epoch == o.epoch {
			e.Payload, u.Frames = nil, bytes.Clone(u.Frames)
			o.early = append(o.early, earlyUpdate{entry: e, update: u})
			return
		}
		if e.Epoch <= c.epochOf(id) {
			c.stats.Stale++
		}
		return
	}
	if src, ok := c.sourceOf(id); ok && src != from {
		// Another node sends this entity: it is its new owner only with a
		// higher epoch (a handoff); otherwise it is refused.
		if st, _, ok := c.rep.Has(e.Entity); ok && e.Epoch <= st.Epoch {
			c.stats.Stale++
			return
		}
	}
	up := replica.Update{Entity: e.Entity, Stamp: replica.Stamp{Epoch: e.Epoch, Seq: e.Sequence}, Chunk: u.Chunk, Frames: u.Frames}
	first, _, err := outbox.ReadFrame(u.Frames)
	if err != nil {
		c.stats.Refused++
		return
	}
	if first.Kind == outbox.KindVanish && first.Reason == interest.OutOfSight && c.holdVanish(from, id, u.Chunk, up.Stamp) {
		return
	}
	if first.Kind != outbox.KindVanish && !c.wanted(from, u.Chunk) && !c.parkedFrom(id, from) {
		// The entity went where this node does not look (or the update
		// crossed an unsubscribe): it is out of sight here. A parked
		// ghost takes it as it comes (nobody here sees its chunk), so a
		// delta that follows into a chunk this node receives finds it.
		if _, _, ok := c.rep.Has(e.Entity); !ok {
			return
		}
		up.Frames = outbox.AppendVanishFrame(nil, e.Entity, interest.OutOfSight)
	}
	_, _, had := c.rep.Has(e.Entity)
	changed, err := c.rep.Apply(up)
	if err != nil {
		c.stats.Refused++
		return
	}
	if !changed && !had && first.Kind == outbox.KindComponent && len(up.Frames) == len(u.Frames) {
		// An orphan: the sender believes this node sees the entity, but
		// its appear never arrived here (or crossed an unsubscribe). A
		// snapshot of the chunk repairs it.
		c.resyncChunk(from, u.Chunk)
	}
	if changed && first.Kind == outbox.KindComponent && len(up.Frames) == len(u.Frames) {
		c.markDirty(id, u.Frames)
	}
	if changed && first.Kind == outbox.KindAppear {
		// A whole new state (a ghost that appeared, or a new owner's after
		// a handoff): local clients that already see it get every value.
		c.r.markAllDirty(id)
	}
	if changed && first.Kind != outbox.KindVanish {
		c.becomeGhost(id, from)
		if first.Kind == outbox.KindComponent {
			c.syncSimGhost(id) // new values; a burst's ghost is synced by its event
		}
	}
}

// markDirty queues local observers' updates for the component frames of
// a ghost delta.
func (c *cluster) markDirty(id ecs.ID, frames []byte) {
	for len(frames) > 0 {
		m, rest, err := outbox.ReadFrame(frames)
		if err != nil {
			return
		}
		frames = rest
		if m.Kind == outbox.KindComponent && c.r.isSynced(m.Component) {
			c.r.out.MarkDirty(id, m.Component)
		}
	}
}

// applySnapshot applies from's snapshot s, sent under table version
// table.
func (c *cluster) applySnapshot(from string, s wire.Snapshot, table uint64) {
	ch := c.r.geo.NormaliseChunk(s.Chunk)
	if !c.wanted(from, ch) {
		return
	}
	delete(c.awaiting, peerChunk{from, ch})
	delete(c.resyncing, peerChunk{from, ch})
	// The snapshot is the sender's part of the chunk: other sources'
	// ghosts there stay (a ghost held at a fence unlisted is noted:
	// sweepFenceHeld ends it once every simulator there left it out).
	var ups []replica.Update
	listed := make(map[uint64]uint64, len(s.Entries))
	for _, e := range s.Entries {
		listed[e.Entity] = e.Epoch
	}
	for _, e := range c.rep.AppendResidents(nil, ch) {
		if _, ok := listed[e]; !ok && c.holdUnlisted(from, ecs.ID(e), ch) {
			st, _, _ := c.rep.Has(e)
			burst, _ := c.rep.AppendBurst(nil, e)
			ups = append(ups, replica.Update{Entity: e, Stamp: st, Frames: burst})
			continue
		}
		if src, _ := c.sourceOf(ecs.ID(e)); src != from {
			st, _, _ := c.rep.Has(e)
			ep, ok := listed[e]
			if ok && ep > st.Epoch {
				continue // the sender is its new owner: its entry replaces it
			}
			if !ok {
				c.unlistedAtFence(from, ecs.ID(e), table)
				if !c.bugs.noSourceResync && src != "" && !c.isFenced(src) && c.r.terr.Table().OwnerOfChunk(ch) == from {
					// The chunk's owner does not have it, and another node
					// is its source here: the source may have handed it
					// over while this node was cut from the taker, whose
					// messages of it were lost (and whose snapshot cannot
					// list what walked on out of the chunk). The source's
					// own snapshot says whether it still has it (it
					// simulates it past the border, or its went record
					// lists it while this node still sees where it went):
					// without asking, the stale ghost stood until the
					// source was dropped from the chunk's subscriptions
					// (the grace of a table change: 5 s), a zombie
					// (zonesim FourWays seeds 31, 37, 40, 42 and 164). Only
					// the owner's snapshot asks, so that two simulators
					// of a border chunk do not ask each other in turn.
					c.resyncChunk(src, ch)
				}
			}
			burst, _ := c.rep.AppendBurst(nil, e)
			ups = append(ups, replica.Update{Entity: e, Stamp: st, Frames: burst})
		}
	}
	took := len(ups) // ups[took:] are the sender's entries applied
	for _, e := range s.Entries {
		if src, ok := c.sourceOf(ecs.ID(e.Entity)); ok && src != from {
			if st, _, ok := c.rep.Has(e.Entity); ok && e.Epoch <= st.Epoch {
				continue // another node's, newer: it stays theirs (source and all)
			}
		}
		if id := ecs.ID(e.Entity); c.r.w.Alive(id) && !c.r.ghost.Has(id) {
			continue // simulated here (a region move in flight)
		}
		ups = append(ups, replica.Update{Entity: e.Entity, Stamp: replica.Stamp{Epoch: e.Epoch, Seq: e.Seq}, Frames: e.Frames})
	}
	applied := slices.Clone(ups[took:])
	if err := c.rep.Replace(ch, ups); err != nil {
		c.stats.Refused++
		return
	}
	// Only an entry applied makes the sender the ghost's source: one
	// skipped for its lower epoch named the sender as the source of a
	// ghost another node sends, whose updates were then refused as stale
	// and the ghost froze.
	for _, e := range applied {
		if _, _, ok := c.rep.Has(e.Entity); ok {
			c.becomeGhost(ecs.ID(e.Entity), from)
			c.r.markAllDirty(ecs.ID(e.Entity))
			c.syncSimGhost(ecs.ID(e.Entity))
		}
	}
}

// applyEvents feeds the replica's lifecycle events to the visibility
// index, so local clients see ghosts like local entities.
func (c *cluster) applyEvents() {
	c.events = c.rep.Drain(c.events[:0])
	for _, ev := range c.events {
		id := ecs.ID(ev.Entity)
		switch ev.Kind {
		case replica.Appeared, replica.Moved:
			if c.r.vis.Reindex(id, ev.Chunk) {
				// Only a move moves what follows it: a ghost that appears
				// where the entity is already filed (a local entity
				// handed over, now a ghost in place; a ghost a snapshot
				// replaced) keeps its anchor and its account's view there.
				c.r.followed(id, ev.Chunk)
			}
		case replica.Vanished:
			if _, _, ok := c.rep.Has(ev.Entity); ok {
				// Replaced within this batch (a snapshot, or a new owner's
				// state): its Appeared event follows and moves it in place,
				// so the clients that see it see no blink, and its source
				// is the new one.
				continue
			}
			c.r.vis.Remove(id, ev.Reason)
			var w *wentTo
			if ev.Reason != interest.Gone {
				// Out of sight, not destroyed: an intent sent to it before
				// this node knew still reaches its owner.
				w = &wentTo{until: c.r.w.CurrentTick().N + ticks(c.r.cfg.Timers.Went)}
			}
			c.vanish(id, w)
			c.goneGhosts[id] = struct{}{} // its vanish is not ours to send on
		}
		c.syncSimGhost(id)
	}
}

// ---- publisher side ----

func (c *cluster) subscribe(from string, s wire.Subscribe) {
	if !c.r.accept(from, s.Fence) {
		c.stats.Refused++
		return
	}
	if old, ok := c.nameOf[s.Fence.Node]; ok && old != from {
		c.stats.Refused++ // two peers claim one number: keep the first
		return
	}
	c.numOf[from], c.nameOf[s.Fence.Node] = s.Fence.Node, from
	key := interest.Node(s.Fence.Node)
	if _, ok := c.sinks[from]; !ok {
		sink := &nodeSink{}
		c.sinks[from] = sink
		c.r.out.Attach(key, sink)
	}
	for _, ch := range s.Remove {
		c.r.subs.Withdraw(key, ch)
		delete(c.asked, peerChunk{from, c.r.geo.NormaliseChunk(ch)})
		c.unseeWent(key, c.r.geo.NormaliseChunk(ch))
	}
	for _, ch := range s.Add {
		c.r.subs.Announce(key, ch)
		c.r.subs.MarkSent(key, ch)
		c.snapshot[from] = append(c.snapshot[from], ch)
		c.asked[peerChunk{from, c.r.geo.NormaliseChunk(ch)}] = struct{}{}
	}
	for _, ch := range s.Resync {
		if c.r.subs.IsSent(key, ch) {
			c.snapshot[from] = append(c.snapshot[from], ch)
		}
	}
}

// publish turns each peer's frames of this flush into one replication
// batch: the fence, one entry per entity, then the snapshots it asked for.
func (c *cluster) publish(seq uint64) {
	peers := make([]string, 0, len(c.sinks))
	for p := range c.sinks {
		peers = append(peers, p)
	}
	slices.Sort(peers)
	fence := c.fence().Append(nil)
	// A node adopting a dead node's entities answers no subscription
	// yet: a snapshot without an entity it is about to adopt would end a
	// ghost of it held at the fence (unlistedAtFence), and the entity
	// would blink. The requests wait in c.snapshot.
	adopting := c.adopting() && !c.bugs.snapAdopting
	for _, p := range peers {
		sink := c.sinks[p]
		snaps := c.snapshot[p]
		if adopting {
			snaps = nil
		}
		if len(sink.frames) == 0 && len(snaps) == 0 {
			continue
		}
		entries := []replication.Entry{{Kind: wire.EntryFence, Payload: fence}}
		entries = c.appendUpdates(entries, sink.frames, seq, len(snaps))
		for _, ch := range snaps {
			delete(c.asked, peerChunk{p, c.r.geo.NormaliseChunk(ch)})
			entries = append(entries, replication.Entry{Kind: wire.EntrySnapshot, Payload: c.r.snapshot(ch, seq, interest.Node(c.numOf[p])).Append(nil)})
			c.stats.Snapshots++
		}
		clear(sink.frames)
		sink.frames = sink.frames[:0]
		if !adopting {
			delete(c.snapshot, p)
		}
		if err := c.tr.Replicate(p, entries); err != nil {
			c.stats.SendErrors++
			continue
		}
		c.bump(func(pr *Progress) {
			s := pr.Sent[p]
			s.Seq++ // the link numbers each peer's batches 1, 2, …
			pr.Sent[p] = s
		})
		c.stats.Batches++
		c.stats.Entries += len(entries) - 1
	}
}

// updGroup is one entity's frames in a flush (appendUpdates).
type updGroup struct {
	id   uint64
	ch   torus.ChunkPos
	size int // its frames' bytes
	at   int // where its next frame goes in buf
}

// updScratch is appendUpdates' scratch, kept between calls: the groups,
// each frame's group, and the entity → group index.
type updScratch struct {
	groups []updGroup
	of     []int32
	at     map[uint64]int32
}

// appendUpdates groups a flush's frames by entity, in the order each
// entity first appears, one entry each. Every entry's payload is cut
// from one buffer, sized exactly: this runs for every peer at every
// tick, with an entry for every entity the peer sees. dst gets room for
// room more entries after them (the snapshots).
func (c *cluster) appendUpdates(dst []replication.Entry, frames [][]byte, seq uint64, room int) []replication.Entry {
	// The scratch is reused (this runs per peer per tick); only buf and
	// dst, which the transport keeps, are new.
	sc := &c.upd
	groups := sc.groups[:0]
	of := slices.Grow(sc.of[:0], len(frames))[:len(frames)] // each frame's group, -1: none
	if sc.at == nil {
		sc.at = make(map[uint64]int32)
	}
	at := sc.at
	last := -1
	for k, f := range frames {
		m, _, err := outbox.ReadFrame(f)
		if err != nil {
			of[k] = -1
			continue // our own outbox's frame: cannot happen
		}
		i := last
		if i < 0 || groups[i].id != m.Entity {
			j, ok := at[m.Entity]
			if !ok {
				j = int32(len(groups))
				at[m.Entity] = j
				groups = append(groups, updGroup{id: m.Entity})
			}
			i = int(j)
		}
		last, of[k] = i, int32(i)
		groups[i].size += len(f)
	}
	var head [wire.MaxUpdateHead]byte
	total := 0
	for i := range groups {
		g := &groups[i]
		ch, ok := c.r.vis.ChunkOf(ecs.ID(g.id))
		if p, gone := c.parting[ecs.ID(g.id)]; !ok && gone {
			ch = p.chunk // its vanish names where it stood
		}
		g.ch = ch
		total += len(wire.AppendUpdateHead(head[:0], ch, g.size)) + g.size
	}
	buf := make([]byte, 0, total)
	dst = slices.Grow(dst, len(groups)+room)
	for i := range groups {
		g := &groups[i]
		start := len(buf)
		buf = wire.AppendUpdateHead(buf, g.ch, g.size)
		g.at = len(buf)
		buf = buf[:g.at+g.size]
		dst = append(dst, replication.Entry{
			Entity: g.id, Epoch: c.epochOf(ecs.ID(g.id)), Sequence: seq, Kind: wire.EntryUpdate,
			Payload: buf[start:len(buf):len(buf)],
		})
	}
	for k, f := range frames {
		if g := of[k]; g >= 0 {
			groups[g].at += copy(buf[groups[g].at:], f)
		}
	}
	clear(at)
	sc.groups, sc.of = groups[:0], of[:0]
	return dst
}

// flushControl sends this tick's subscription changes, forwards, intents
// and route changes, one message per kind per peer.
func (c *cluster) flushControl(tick uint64) {
	fence := c.fence()
	for _, p := range sortedKeys(c.subOut) {
		s := c.subOut[p]
		s.Fence = fence
		c.queue(p, wire.KindSubscribe, s.Append(nil))
		c.stats.Subscribes++
		delete(c.subOut, p)
	}
	for _, p := range sortedKeys(c.fwd) {
		b := c.fwd[p]
		b.msg.Fence, b.msg.Tick = fence, tick
		c.queue(p, wire.KindForward, b.msg.Append(nil))
		c.stats.Forwards++
		delete(c.fwd, p)
	}
	for _, p := range sortedKeys(c.intentsOut) {
		for list := c.intentsOut[p]; len(list) > 0; {
			n := min(len(list), wire.MaxIntents)
			errs := c.stats.SendErrors
			c.queue(p, wire.KindIntents, wire.Intents{Fence: fence, Tick: tick, List: list[:n]}.Append(nil))
			if c.stats.SendErrors > errs {
				// Not sent: the peer can never confirm them.
				c.ledger(p).sent -= uint64(n)
				c.dropIntents(&c.stats.IntentsUnsent, n)
			}
			list = list[n:]
		}
		delete(c.intentsOut, p)
	}
	c.flushIntentAcks(fence)
	// A new table is announced at once (every message's fence carries the
	// version): a node handing a region over waits for its new owner to
	// hold the table that gives it.
	full := tick%ticks(c.r.cfg.Timers.FullRoutes) == 1 || c.announceTable
	c.announceTable = false
	if len(c.routeSet) == 0 && !full {
		return
	}
	var msg wire.Routes
	msg.Fence = fence
	c.routeVer[c.r.cfg.Name]++
	msg.Version = c.routeVer[c.r.cfg.Name]
	if full {
		msg.Full = true
		for a := range c.mine {
			msg.Set = append(msg.Set, a)
		}
	} else {
		for a, set := range c.routeSet {
			if set {
				msg.Set = append(msg.Set, a)
			} else {
				msg.Unset = append(msg.Unset, a)
			}
		}
	}
	clear(c.routeSet)
	slices.Sort(msg.Set)
	slices.Sort(msg.Unset)
	payload := msg.Append(nil)
	for _, p := range c.r.terr.Table().Nodes() {
		if p != c.r.cfg.Name {
			c.queue(p, wire.KindRoutes, payload)
		}
	}
}

// ---- routing by account ----

func (c *cluster) attachLocal(a account.ID, sink outbox.Sink) {
	c.setMine(a, sink != nil)
	if sink == nil {
		delete(c.local, a)
		if p, ok := c.routes[a]; ok {
			c.r.out.Attach(interest.Account(a), fwdSink{c: c, peer: p, acct: a})
		}
		return
	}
	c.local[a] = sink
}

func (c *cluster) setMine(a account.ID, mine bool) {
	if c.mine[a] == mine {
		return
	}
	if mine {
		c.mine[a] = true
	} else {
		delete(c.mine, a)
	}
	c.routeSet[a] = mine
}

func (c *cluster) applyRoutes(from string, m wire.Routes) {
	if !c.r.accept(from, m.Fence) {
		c.stats.Refused++
		return
	}
	if m.Version <= c.routeVer[from] {
		return // a resent or older announcement
	}
	c.routeVer[from] = m.Version
	unset := m.Unset
	if m.Full {
		for a, p := range c.routes {
			if p == from && !slices.Contains(m.Set, a) {
				unset = append(unset, a)
			}
		}
	}
	for _, a := range unset {
		if c.routes[a] != from {
			continue
		}
		delete(c.routes, a)
		if _, ok := c.local[a]; !ok {
			c.r.out.Detach(interest.Account(a))
		}
	}
	var fresh []account.ID
	for _, a := range m.Set {
		if c.routes[a] == from {
			continue
		}
		c.routes[a] = from
		if _, ok := c.local[a]; !ok {
			c.r.out.Attach(interest.Account(a), fwdSink{c: c, peer: from, acct: a})
			fresh = append(fresh, a)
		}
	}
	c.r.resendPrivate(fresh)
}

func (c *cluster) deliverForward(from string, m wire.Forward) {
	if !c.r.accept(from, m.Fence) {
		c.stats.Refused++
		return
	}
	var frames [][]byte
	for _, af := range m.Accounts {
		sink, ok := c.local[af.Account]
		if !ok {
			continue // the account left this node: dropped
		}
		frames = frames[:0]
		for _, i := range af.Frames {
			frames = append(frames, m.Frames[i])
		}
		sink.Deliver(m.Tick, frames)
	}
}

// ---- intents ----

// routeIntent sends an intent for an entity this node does not simulate
// to the node that sends its ghost — or, if it was handed on from here
// and no ghost kept, to where it went — and reports whether it knew one.
func (c *cluster) routeIntent(in Intent) bool {
	var p string
	var epoch uint64
	if src, ok := c.sourceOf(in.Target); ok {
		p = src
		if st, _, ok := c.rep.Has(uint64(in.Target)); ok {
			epoch = st.Epoch
		}
	} else if w, ok := c.wentOf(in.Target); ok {
		p, epoch = w.peer, w.epoch
	} else {
		c.dropIntents(&c.stats.IntentsLapsed, 1)
		return false
	}
	c.sendIntent(p, in, epoch)
	return true
}

// sendIntent queues in for peer p, which simulates its target at epoch
// (as far as this node knows). To a peer fenced here it is not sent: it
// goes to its target's heir, or waits for its target to come back on a
// live node (intentfate.go).
func (c *cluster) sendIntent(p string, in Intent, epoch uint64) {
	if c.isFenced(p) {
		h, ok := c.heirOf(in.Target)
		if !ok || c.awaitsAdoption(in.Target) {
			c.awaitOwner(in)
			return
		}
		p, epoch = h, 0
		c.stats.IntentsToHeir++
	}
	c.intentsOut[p] = append(c.intentsOut[p], wire.Intent{Kind: in.Kind, Source: uint64(in.Source), Target: uint64(in.Target), Epoch: epoch, Amount: in.Amount, Data: in.Data})
	c.stats.IntentsSent++
	c.ledger(p).sent++
}

func (c *cluster) receiveIntents(from string, m wire.Intents) {
	if !c.r.accept(from, m.Fence) {
		c.stats.Refused++
		return
	}
	c.intentsTaken(from, m.Fence.Lease, len(m.List))
	for _, in := range m.List {
		id := ecs.ID(in.Target)
		if c.r.w.Alive(id) && !c.r.isGhost(id) && !c.r.ghost.Has(id) && c.outgoingOf(id) == nil && c.epochOf(id) < in.Epoch {
			// The sender knows a newer owner than this copy: a stale one.
			// (A source waiting for its handoff's answer keeps it: it
			// follows the entity with the answer.)
			c.stats.Stale++
			c.dropIntents(&c.stats.IntentsStale, 1)
			continue
		}
		c.r.intents = append(c.r.intents, Intent{Kind: in.Kind, Source: ecs.ID(in.Source), Target: id, Amount: in.Amount, Data: in.Data})
	}
}

// drain handles every queued peer message, in arrival order.
func (c *cluster) drain() {
	c.mu.Lock()
	msgs := c.inbox
	c.inbox = nil
	c.stats.InboxDropped = c.inboxDropped
	c.mu.Unlock()
	if c.replicationFirst {
		slices.SortStableFunc(msgs, func(a, b inMsg) int { return cmp.Compare(min(a.kind, 1), min(b.kind, 1)) })
	}
	for _, m := range msgs {
		var err error
		switch m.kind {
		case 0:
			c.receive(m)
		case wire.KindSubscribe:
			var s wire.Subscribe
			if s, err = wire.DecodeSubscribe(m.payload); err == nil {
				c.subscribe(m.from, s)
			}
		case wire.KindIntents:
			var s wire.Intents
			if s, err = wire.DecodeIntents(m.payload); err == nil {
				c.receiveIntents(m.from, s)
			}
		case wire.KindIntentsAck:
			var s wire.IntentsAck
			if s, err = wire.DecodeIntentsAck(m.payload); err == nil {
				c.receiveIntentsAck(m.from, s)
			}
		case wire.KindForward:
			var s wire.Forward
			if s, err = wire.DecodeForward(m.payload); err == nil {
				c.deliverForward(m.from, s)
			}
		case wire.KindRoutes:
			var s wire.Routes
			if s, err = wire.DecodeRoutes(m.payload); err == nil {
				c.applyRoutes(m.from, s)
			}
		case wire.KindPlayer:
			err = c.receivePlayer(m.from, m.payload)
		case wire.KindTerrain:
			err = c.receiveTerrain(m.from, m.payload)
		case kindResend:
			c.resendWants(m.from)
		case handoff.KindTransfer, handoff.KindAck, handoff.KindRefuse, KindAbort:
			err = c.receiveHandoff(m)
		case KindCheckpoint, KindAdoptQuery, KindAdoptAnswer, kindCkptResend:
			err = c.receiveCkpt(m)
		}
		if err != nil {
			c.stats.Refused++
			c.r.cfg.Logger.Warn("zone: refused a peer message", "peer", m.from, "kind", m.kind, "err", err)
		}
	}
	c.fencedPeers()
	c.thaw()
	c.ckptTick()
	for _, p := range sortedKeys(c.resendDue) {
		c.resendWants(p)
	}
	// A gap means lost batches: ask each such source again for every chunk
	// this node receives from it (resyncing: until their snapshots come,
	// a ghost its snapshot of one chunk leaves out may stand in another).
	tick := c.r.w.CurrentTick().N
	// Swept only when an entry can have expired: ranging over the map
	// every tick was dear under -race (a detector call per entry).
	if len(c.resyncing) > 0 && tick > c.resyncExpiry {
		c.resyncExpiry = math.MaxUint64
		for k, until := range c.resyncing {
			if tick > until {
				delete(c.resyncing, k)
			} else {
				c.resyncExpiry = min(c.resyncExpiry, until)
			}
		}
	}
	for _, p := range sortedKeys(c.gaps) {
		for ch, peers := range c.wants {
			if slices.Contains(peers, p) {
				c.sub(p).Resync = append(c.sub(p).Resync, ch)
				until := tick + ticks(c.r.cfg.Timers.Hold)
				c.resyncing[peerChunk{p, c.r.geo.NormaliseChunk(ch)}] = until
				c.resyncExpiry = min(c.resyncExpiry, until)
			}
		}
		if s := c.subOut[p]; s != nil {
			slices.SortFunc(s.Resync, cmpChunk)
		}
		delete(c.gaps, p)
	}
}

// resyncChunk asks peer for a snapshot of ch, at most once per
// Timers.Resync ticks per chunk and peer.
func (c *cluster) resyncChunk(peer string, ch torus.ChunkPos) {
	ch = c.r.geo.NormaliseChunk(ch)
	if !c.wanted(peer, ch) {
		return
	}
	k := resyncKey{peer, ch}
	now := c.r.w.CurrentTick().N
	if at, ok := c.resyncAt[k]; ok && now < at {
		return
	}
	c.resyncAt[k] = now + ticks(c.r.cfg.Timers.Resync)
	c.sub(peer).Resync = append(c.sub(peer).Resync, ch)
}

// resyncKey names one chunk held from one peer.
type resyncKey struct {
	peer string
	ch   torus.ChunkPos
}

// receiveHandoff decodes and applies one handoff message, from a peer
// whose lease is live.
func (c *cluster) receiveHandoff(m inMsg) error {
	switch m.kind {
	case handoff.KindTransfer:
		t, err := handoff.DecodeTransfer(m.payload)
		if err != nil {
			return err
		}
		if len(t.Entities) > 0 && c.acceptPeer(m.from) {
			c.receiveTransfer(m.from, t)
		}
	case handoff.KindAck:
		a, err := handoff.DecodeAck(m.payload)
		if err != nil {
			return err
		}
		if c.acceptPeer(m.from) {
			c.receiveAck(m.from, a)
		}
	case handoff.KindRefuse, KindAbort:
		f, err := handoff.DecodeRefuse(m.payload)
		if err != nil {
			return err
		}
		if !c.acceptPeer(m.from) {
			return nil
		}
		if m.kind == KindAbort {
			c.receiveAbort(m.from, f)
		} else {
			c.receiveRefuse(m.from, f)
		}
	}
	return nil
}

// acceptPeer is the fence for messages without a wire.Fence (handoff's):
// the peer's last lease must still be live.
func (c *cluster) acceptPeer(p string) bool {
	if c.r.cfg.Accept == nil {
		return true
	}
	l, ok := c.leaseOf[p]
	if ok && c.r.cfg.Accept(p, l) {
		return true
	}
	c.stats.Refused++
	return false
}

// resendWants sends peer every chunk this node wants from it again (the
// publisher treats a repeated Add as a resubscribe: a fresh snapshot).
func (c *cluster) resendWants(p string) {
	now := c.r.w.CurrentTick().N
	if next, ok := c.resendAt[p]; ok && now < next {
		c.resendDue[p] = true // retried when the wait is over
		return
	}
	c.resendAt[p] = now + ticks(c.r.cfg.Timers.Resend)
	delete(c.resendDue, p)
	for ch, peers := range c.wants {
		if slices.Contains(peers, p) {
			c.addSub(p, ch)
		}
	}
	if s := c.subOut[p]; s != nil {
		slices.SortFunc(s.Add, cmpChunk)
		s.Add = slices.Compact(s.Add)
	}
}

// fencedPeers forgets every peer whose last accepted lease is no longer
// live: its ghosts are held as they stand (holdFenced: it may no longer
// write them, and a failover's standby adopts them under the same ids),
// nothing more is sent to it, and accounts routed to it are routed
// nowhere.
func (c *cluster) fencedPeers() {
	if c.r.cfg.Accept == nil {
		return
	}
	for _, p := range sortedKeys(c.leaseOf) {
		if c.r.cfg.Accept(p, c.leaseOf[p]) {
			continue
		}
		c.fenced[p] = c.leaseOf[p]
		delete(c.leaseOf, p)
		c.r.cfg.Logger.Warn("zone: peer lost its lease: its ghosts are held for its standby", "peer", p)
		if !c.bugs.dropAtFence {
			c.holdFenced(p)
		}
		// In chunk order: a drop (the planted dropAtFence) raises its
		// ghosts' vanishes, in the order of the frames clients get.
		for _, ch := range sortedChunks(c.wants) {
			if peers := c.wants[ch]; slices.Contains(peers, p) {
				if c.bugs.dropAtFence {
					c.dropChunk(p, ch)
				}
				c.wants[ch] = slices.DeleteFunc(slices.Clone(peers), func(x string) bool { return x == p })
				if len(c.wants[ch]) == 0 {
					delete(c.wants, ch)
				}
			}
		}
		c.forgetPeer(p)
	}
}

// forgetPeer drops what this node keeps for a peer's incarnation: its
// node subscriptions here, and the accounts routed to it.
func (c *cluster) forgetPeer(p string) {
	c.closeLedger(p)
	if n, ok := c.numOf[p]; ok {
		c.unseeAll(interest.Node(n)) // its next incarnation holds no ghost from here
		c.r.subs.Forget(interest.Node(n))
		c.r.out.Detach(interest.Node(n))
		delete(c.sinks, p)
		delete(c.numOf, p)
		delete(c.nameOf, n)
		delete(c.snapshot, p)
	}
	for k := range c.asked {
		if k.peer == p {
			delete(c.asked, k)
		}
	}
	for a, q := range c.routes {
		if q == p {
			delete(c.routes, a)
			if _, ok := c.local[a]; !ok {
				c.r.out.Detach(interest.Account(a))
			}
		}
	}
	delete(c.routeVer, p)
	for k := range c.awaiting {
		if k.peer == p {
			delete(c.awaiting, k)
		}
	}
}

// sawLease records the lease of an accepted message. A new lease means
// the peer restarted (or came back after its fence): its new incarnation
// knows none of this node's subscriptions, so they are sent again, and
// what the old one had here is forgotten.
// sawFence notes an accepted fence of peer's: its lease (sawLease) and
// the table version it follows. The table a peer follows only rises
// within one incarnation; a new lease (a restart) starts from what that
// incarnation says.
func (c *cluster) sawFence(peer string, f wire.Fence) {
	l, known := c.leaseOf[peer]
	c.sawLease(peer, f.Lease)
	if !known || l != f.Lease || f.Table > c.peerTable[peer] {
		c.peerTable[peer] = f.Table
	}
}

// notOurVanish reports whether a vanish the visibility index raised for
// node subscriber sub is not this node's to send: one of a ghost gone
// this tick (its vanish is its sender's), of a ghost, or an out-of-sight
// vanish of an entity adopted this tick for a peer that never saw it
// here (wasGhost).
func (c *cluster) notOurVanish(v interest.Vanished[ecs.ID], sub Subscriber) bool {
	_, gone := c.goneGhosts[v.Entity]
	saw, adopted := c.wasGhost[v.Entity]
	return gone || c.isGhost(v.Entity) ||
		adopted && v.Reason == interest.OutOfSight && !slices.Contains(saw, sub) && !c.bugs.adoptionVanish
}

// clearVanishScratch ends the tick's goneGhosts and wasGhost, once the
// index's vanishes are filtered.
func (c *cluster) clearVanishScratch() {
	clear(c.goneGhosts)
	clear(c.wasGhost)
}

// clearTick ends the tick's parting, once the flush sent its vanishes.
func (c *cluster) clearTick() { clear(c.parting) }

func (c *cluster) sawLease(p string, lease int64) {
	old, known := c.leaseOf[p]
	_, wasFenced := c.fenced[p]
	c.leaseOf[p] = lease
	if (!known || old == lease) && !wasFenced {
		return
	}
	delete(c.fenced, p)
	c.forgetPeer(p)
	for ch, peers := range c.wants {
		if slices.Contains(peers, p) {
			c.addSub(p, ch)
		}
	}
	if s := c.subOut[p]; s != nil {
		slices.SortFunc(s.Add, cmpChunk)
	}
	for ch := range c.held {
		c.changed[ch] = struct{}{}
	}
	for ch := range c.band {
		c.changed[ch] = struct{}{}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// sortedChunks is m's chunks in cmpChunk order.
func sortedChunks[V any](m map[torus.ChunkPos]V) []torus.ChunkPos {
	ks := make([]torus.ChunkPos, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, cmpChunk)
	return ks
}

func cmpChunk(a, b torus.ChunkPos) int {
	if a.Slab != b.Slab {
		return int(a.Slab) - int(b.Slab)
	}
	if a.Y != b.Y {
		return int(a.Y) - int(b.Y)
	}
	return int(a.X) - int(b.X)
}
