package zone

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/handoff"
	"github.com/shardwise/shardwise/torus"
)

// Replicated checkpoints and their adoption on failover.
//
// The stream. Every Timers.CheckpointEvery ticks (at a phase set by the
// node number), a node sends, for each region it owns, the state of every
// entity it holds there (simulated, or frozen in a handoff) to the
// region's Standby among the live zone nodes it knows, on the ordered
// control stream (KindCheckpoint): each entity in the handoff codec (the
// snapshot a handoff would carry, so nothing a handoff keeps is lost), a
// snapshot first and then deltas (the entities new or changed since the
// last message, those gone, and those that moved to another region's
// stream of this node's), numbered. An entity standing past a border
// within the margin counts for the owned region next to it. A snapshot is
// sent again every ckptFullEvery checkpoints, when the standby changes,
// and after the transport did not take a message to the standby. Between
// two checkpoints, what the node takes (a handoff's transfer, before its
// ack; an adoption, at the end of the tick) goes at once as a partial
// delta of those entities (checkpointTaken), or, in a region whose
// stream has no snapshot yet, as a whole checkpoint then.
//
// The standby keeps one record per entity per region (its snapshot's
// bytes, checked on arrival, decoded only to adopt it: checkpoint_enc.go),
// replaced by the newest, dropped when the owner says it is gone, kept for
// ckptMovedKeep checkpoints when it says it moved (a checkpoint may
// arrive in part: the other region's message, to another standby, may
// never arrive, and the old record, claimed older, is then the only
// one); it applies a delta only
// right after the message before it (a gap waits for the next snapshot),
// and only from the node its held table names as the region's owner,
// under a lease it accepts (a stream from a node its table does not name
// yet is held back, neither adopted nor checked, until the next table it
// installs names the sender, else dropped: the owner that installed the
// table first starts a region it was given before its standby knows). It drops a region's records when it is no
// longer the region's standby, and when the region's owner changes by a
// move (the old owner is live and shows the new table: its entities go by
// handoff). The records are passive: nothing simulates them, nobody sees
// them (they are not in the world).
//
// Adoption. When a node holds a table that gives it a region whose
// previous owner (the sender of its records) it no longer accepts (the
// lease ended: the failover case), it adopts the records: first it asks
// every other live zone node which of the candidates it holds
// (KindAdoptQuery). A peer answers (KindAdoptAnswer) only once it holds
// that table (or a newer one) and refuses every dead node named, so it
// takes nothing more from them: what it holds then is all it will ever
// hold of theirs. It names the candidates it holds (simulated, or frozen
// in a handoff: the source of a handoff to the dead node unfroze it at
// the fence) and those it adopts itself under a newer claim (a later
// checkpoint tick; on a tie the greater node name), so that an entity
// that crossed between two of the dead node's regions comes back once.
// Within one node the same order holds: a round's candidate is the
// newest record (a later epoch, or from the same owner a later tick) the
// node holds of the entity in any dead owner's stream, not only in the
// streams the round adopts (newestHeld). Once every live peer has
// answered, the node creates the rest under the same ids, in the
// handoff's way (the module's codecs and hooks, so dens and mobs come
// back as a region move brings them), at the checkpointed epoch plus
// adoptEpochMargin. The region's columns are not set up while
// an adoption is in flight.
//
// The epoch. Peers hold the dead node's ghosts as they stood (taking
// nothing more of them: fencehold.go) and refuse its messages at the
// fence, before they answer, so no epoch of the dead node's is live
// anywhere when the adopted entity appears: the margin is a second line.
// Between two checkpoints (CheckpointEvery <= HandoffRetry, checked at
// New) an entity's epoch rises on its node by at most 3: an offer (e+1),
// an unfreeze after a refusal (e+2), a new offer after HandoffRetry
// (e+3). Adopted at e+4, it is above anything the dead node can have sent
// about it since the checkpoint.
//
// What can be lost: the simulation of every adopted entity since its
// last checkpoint (at most CheckpointEvery ticks, plus the control
// stream's delay); what a standby stalled across the lease's end had
// received and not read (it refuses it at the fence then); what a node
// cut from a standby (not from the lease) sent it since the cut, if it
// dies before the heal; an entity a node
// took whose ack reached the source while the take's checkpoint, on
// another link, did not reach the standby before the node died; what a
// node created since its last checkpoint; and, when an adopter dies
// before it has adopted a dead node's records and checkpointed them on,
// those records (its standby holds nothing of them). A standby whose
// stream had a gap keeps the records it had until the next snapshot:
// an entity gone meanwhile may come back, as may one destroyed within
// ckptMovedKeep checkpoints of a move between two streams.

// ckptFullEvery is how many checkpoints of a stream go between two
// snapshots (the repair of a standby that ignored a delta, its table
// behind the owner's).
const ckptFullEvery = 10

// ckptMaxBytes bounds the entity states of one checkpoint message (a
// larger region's checkpoint goes in several, well under the link's
// 4 MiB frame).
const ckptMaxBytes = 1 << 20

// adoptEpochMargin is what an adopted entity's epoch is raised by over
// its checkpointed epoch (see above).
const adoptEpochMargin = 4

// kindCkptResend is the inbox item Arrivals.Written leaves when the
// network did not take a checkpoint: its peer's streams start again
// with a snapshot.
const kindCkptResend = 0xFFFFFFFE

// CheckpointStats count the checkpoint stream and adoptions since New.
type CheckpointStats struct {
	// Sent counts checkpoint messages sent; Entities the entity states
	// they carried, Gone the entities they said were gone, Bytes their
	// payload bytes.
	Sent, Entities, Gone, Bytes int
	// Received counts checkpoint messages applied; Ignored those not
	// (not from the region's owner, not this node's region to stand by,
	// a delta without its snapshot), Gaps the deltas that came after a
	// missing one.
	Received, Ignored, Gaps int
	// Records is the entity records held now, over every region.
	Records int
	// Rounds counts adoptions started; Adopted the entities created from
	// records; Taken the candidates a peer said it holds or adopts; Here
	// those this node already held.
	Rounds, Adopted, Taken, Here int
	// Answered counts adoption queries this node answered.
	Answered int
}

// ckptBugs are planted variants of the checkpoint protocol, set only by
// tests (checkpoint_export_test.go) to prove the simulation catches each.
type ckptBugs struct {
	noQuery bool // adopt without asking the live peers
	noRaise bool // adopt at the checkpointed epoch
	noFence bool // a standby takes a checkpoint from a node that is not the region's owner
	noTake  bool // what a node takes waits for its next checkpoint
	noMoved bool // an entity that walked into another region's stream is said gone from the old one
	// noLaterClaim: a peer answers an adoption query from its rounds only,
	// not from the records it will adopt once the failover table comes.
	noLaterClaim bool
	// noSupersede: a round keeps the candidates of entities this node
	// took at a newer epoch (and may have handed on) since the record.
	noSupersede bool
	// noNewest: a round adopts the record of the streams it adopts even
	// when this node holds a newer one of the entity in another dead
	// owner's stream (adopted in a later round).
	noNewest bool
	// roundDeadOnly: a round takes a render ghost from a node that died
	// before the round's owners for a sign that a live peer holds it.
	roundDeadOnly bool
	// strictRecords: invariant 10 holds a copy frozen in a handoff it
	// offered to it too (a false breach while its ack is held up).
	strictRecords bool
	// keepOffered: an adoption round counts a copy frozen in a handoff
	// offered below the record's epoch as held here (and the entity is
	// lost when the held-up ack comes).
	keepOffered bool
}

// ckptState is a node's side of the checkpoint stream and adoptions,
// owned by the world goroutine.
type ckptState struct {
	seed maphash.Seed
	// Owner side: a stream per owned region, and the peers whose next
	// message starts with a snapshot.
	out        map[cells.RegionID]*ckptOut
	resendFull map[string]bool
	lastTick   uint64 // the tick of this node's last checkpoint
	// fresh are the entities this node took (handoff in, adoption) and
	// has not yet sent in a checkpoint (checkpointFresh).
	fresh   []ecs.ID
	groups  map[cells.RegionID][]ecs.ID
	outGrid cells.Grid // the grid out's and groups' region ids belong to
	// Standby side: the table held before the current one (a stream
	// may start from a region's owner in either: a move in flight), and
	// the records per region and owner (a region's old
	// owner's stay beside its new owner's until the old one shows it holds
	// the table that moved the region, or dies).
	in        map[ckptKey]*ckptIn
	table     *cells.Table
	prevTable *cells.Table
	// Adoptions in flight by round, and the next round's number.
	rounds map[uint64]*adoption
	round  uint64
	// queries wait until this node may answer them.
	queries []pendingQuery
	// waiters are logins waiting for this node's records of their
	// account to be adopted or gone (ckptplayers.go).
	waiters []adoptionWaiter
	// restored are the entities created from records, with the tick.
	restored map[ecs.ID]uint64
	stats    CheckpointStats
	bugs     ckptBugs
	// enc is the sender's buffers; states the receiver's, for the
	// snapshots of the message it applies (checkpoint_enc.go).
	enc    ckptEnc
	states []handoff.RawSnapshot
}

// ckptOut is one region's stream at its owner.
type ckptOut struct {
	standby string
	seq     uint64
	n       int               // checkpoints sent on this stream
	full    bool              // the next starts with a snapshot
	sent    map[ecs.ID]uint64 // what the standby holds: entity → hash of its state
	spare   map[ecs.ID]uint64 // the map sent was before, reused for the next
}

// ckptKey names one stream: a region and the node that sends it.
type ckptKey struct {
	region cells.RegionID
	owner  string
}

// ckptIn is one stream's records at its standby.
type ckptIn struct {
	owner  string
	lease  int64
	seq    uint64
	tick   uint64 // the owner's tick of the last message applied
	synced bool   // every message since the snapshot applied
	// named is whom the held table named as the region's owner when the
	// stream's first snapshot was applied (invariant 9: the sender), or
	// when a held-back stream was confirmed.
	named string
	// grid is the held table's grid when the stream started: a region id
	// means nothing under another grid, so a grid change ends the stream.
	grid cells.Grid
	// heldBack: the stream started while the held table named another
	// owner (the sender installed a newer table first: a region it was
	// just given). Its records are kept, not adopted and not counted
	// as a standby's, until the next table this node installs names the
	// sender (then named is set); dropped unconfirmed if that table does
	// not, or the sender dies first. heldVer is the table version held
	// when the stream started.
	heldBack bool
	heldVer  uint64
	// recs are the records, each an entity's snapshot as encoded, in a
	// buffer of the stream's (put); free are buffers of records gone.
	recs map[ecs.ID]handoff.RawSnapshot
	free [][]byte
	// moved are the records of entities the owner said moved to another
	// of its regions' streams, each with its claim (the stream's tick
	// before the move): kept, as older than anything that stream
	// carries, until ckptMovedKeep checkpoints later. Each keeps the
	// buffer it had in recs.
	moved map[ecs.ID]movedRec
}

// movedRec is a record its stream no longer carries: the entity walked
// into another region of the same owner.
type movedRec struct {
	snap handoff.RawSnapshot
	tick uint64
}

// ckptMovedKeep is how many of its stream's checkpoints a moved record
// outlives: by then the stream the entity moved to has named it at its
// own standby, or has started again from a snapshot (a message not
// taken), unless the owner died first.
const ckptMovedKeep = 2

// adoption is one round: the candidates of the regions a table gave
// this node from dead owners, and the peers still to answer.
type adoption struct {
	table   uint64
	dead    []string
	cands   map[ecs.ID]candidate
	waiting map[string]int // peer → the query messages it has still to answer
	asked   []string       // the peers asked, sorted
}

type candidate struct {
	snap   handoff.RawSnapshot
	tick   uint64
	region cells.RegionID
	owner  string // the node whose stream sent the record
}

type pendingQuery struct {
	from string
	q    adoptQuery
}

func newCkptState() ckptState {
	return ckptState{
		seed: maphash.MakeSeed(),
		out:  make(map[cells.RegionID]*ckptOut), resendFull: make(map[string]bool),
		in:     make(map[ckptKey]*ckptIn),
		rounds: make(map[uint64]*adoption), restored: make(map[ecs.ID]uint64),
	}
}

// CheckpointStats returns the checkpoint counters.
func (r *Runtime) CheckpointStats() CheckpointStats {
	if r.cluster == nil {
		return CheckpointStats{}
	}
	s := r.cluster.ckpt.stats
	for _, in := range r.cluster.ckpt.in {
		s.Records += len(in.recs) + len(in.moved)
	}
	return s
}

// CheckpointRecord is what a standby holds of one entity.
type CheckpointRecord struct {
	Region cells.RegionID
	Owner  string // the node that sent it
	Epoch  uint64 // the entity's epoch on its owner
	Tick   uint64 // the owner's tick of the last checkpoint message applied
}

// Checkpointed appends to dst the records this node holds of entity id
// as a standby, one per stream that names it, by region and owner.
func (r *Runtime) Checkpointed(dst []CheckpointRecord, id ecs.ID) []CheckpointRecord {
	if r.cluster == nil {
		return dst
	}
	n := len(dst)
	for k, in := range r.cluster.ckpt.in {
		if in.heldBack {
			continue
		}
		if s, ok := in.recs[id]; ok {
			dst = append(dst, CheckpointRecord{Region: k.region, Owner: in.owner, Epoch: s.Epoch, Tick: in.tick})
		} else if mv, ok := in.moved[id]; ok {
			dst = append(dst, CheckpointRecord{Region: k.region, Owner: in.owner, Epoch: mv.snap.Epoch, Tick: mv.tick})
		}
	}
	slices.SortFunc(dst[n:], func(a, b CheckpointRecord) int {
		return cmpCkptKey(ckptKey{a.Region, a.Owner}, ckptKey{b.Region, b.Owner})
	})
	return dst
}

// Restored reports whether this node created id from a checkpoint (an
// adoption on failover) and still holds it, and the tick it did.
func (r *Runtime) Restored(id ecs.ID) (uint64, bool) {
	if r.cluster == nil || !r.w.Alive(id) || r.isGhost(id) {
		return 0, false
	}
	t, ok := r.cluster.ckpt.restored[id]
	return t, ok
}

// LastCheckpoint returns the tick of this node's last checkpoint.
func (r *Runtime) LastCheckpoint() uint64 {
	if r.cluster == nil {
		return 0
	}
	return r.cluster.ckpt.lastTick
}

// AdoptionPending reports whether an adoption waits for peers' answers.
func (r *Runtime) AdoptionPending() bool { return r.cluster != nil && len(r.cluster.ckpt.rounds) > 0 }

// InAdoption reports whether a record of id is a candidate of an
// adoption round in flight here (taken out of its stream, so Checkpointed
// no longer lists it): this node creates it when the round ends unless a
// peer answers that it holds it.
func (r *Runtime) InAdoption(id ecs.ID) bool {
	if r.cluster == nil {
		return false
	}
	for _, a := range r.cluster.ckpt.rounds {
		if _, ok := a.cands[id]; ok {
			return true
		}
	}
	return false
}

// adopting reports whether this node adopts a dead node's entities: a
// round waits for answers, or the held table gives away a dead owner's
// region whose records wait for the next ckptTick to start one. What it
// simulates is not yet all it will simulate of theirs. (Records of a
// dead owner the table still names do not count: with no failover table
// that lasts, and an observer counts no snapshot sent under a table
// older than the one that gave the region away: unlistedAtFence.)
func (c *cluster) adopting() bool {
	if len(c.ckpt.rounds) > 0 {
		return true
	}
	table := c.r.terr.Table()
	for k, in := range c.ckpt.in {
		if !in.heldBack && in.grid == table.Grid() && table.Owner(k.region) != in.owner && !c.peerLive(in.owner, in.lease) {
			return true
		}
	}
	return false
}

// liveNodes is the zone nodes this node counts as live, itself
// included, sorted: Config.LivePeers' (or, without it, the held table's
// nodes and the peers heard from, less those whose lease ended).
func (c *cluster) liveNodes() []string {
	r := c.r
	var out []string
	if r.cfg.LivePeers != nil {
		out = slices.Collect(maps.Keys(r.cfg.LivePeers()))
	} else {
		out = r.terr.Table().Nodes()
		for p := range c.leaseOf {
			out = append(out, p)
		}
		out = slices.DeleteFunc(out, c.isFenced)
	}
	out = append(out, r.cfg.Name)
	slices.Sort(out)
	return slices.Compact(out)
}

// peerLive reports whether this node still accepts peer under lease.
func (c *cluster) peerLive(peer string, lease int64) bool {
	if c.r.cfg.Accept != nil {
		return c.r.cfg.Accept(peer, lease)
	}
	return !c.isFenced(peer)
}

// homeRegion is the region whose stream carries an entity standing at
// p: its own region if this node owns it, else an owned region within
// the handoff margin (it walked past a border and is not handed yet),
// else its own region if this node streams it, else a region within the
// margin this node streams (one a new table moved away: this node streams
// it on until it has handed everything there over, to a standby that
// holds its records already), else its own region.
//
// The streamed neighbour matters: an entity past the border of a region
// a new table just moved away, in a region this node never owned, would
// otherwise start a stream the standby ignores (the sender is not the
// region's owner in any table it held), while the region it came from
// says it is gone: checkpointed nowhere (zonesim seed 1386).
func (c *cluster) homeRegion(table *cells.Table, p torus.Pos) cells.RegionID {
	grid := table.Grid()
	self := c.r.cfg.Name
	reg := grid.RegionOf(p)
	if table.Owner(reg) == self {
		return reg
	}
	m := c.r.cfg.Bands.HandoffMargin
	near := [8][2]float64{{-1, 0}, {1, 0}, {0, -1}, {0, 1}, {-1, -1}, {1, -1}, {-1, 1}, {1, 1}}
	for _, d := range near {
		q := grid.RegionOf(torus.Pos{X: p.X + d[0]*m, Y: p.Y + d[1]*m})
		if table.Owner(q) == self {
			return q
		}
	}
	if c.ckpt.out[reg] != nil {
		return reg
	}
	for _, d := range near {
		q := grid.RegionOf(torus.Pos{X: p.X + d[0]*m, Y: p.Y + d[1]*m})
		if c.ckpt.out[q] != nil {
			return q
		}
	}
	return reg
}

// checkpoint sends this tick's checkpoint, if it is due: one stream per
// owned region, to its standby.
func (c *cluster) checkpoint(tick uint64) {
	r := c.r
	ck := &c.ckpt
	if r.cfg.NoCheckpoint {
		ck.fresh = ck.fresh[:0] // noted by the handoff all the same
		return
	}
	if (tick+uint64(r.cfg.Node))%ticks(r.cfg.Timers.CheckpointEvery) != 0 {
		if len(ck.fresh) == 0 || c.checkpointFresh(tick) {
			return
		}
		// One was taken into a region whose standby has no snapshot of
		// this node's yet (a region move or a failover gave it this
		// node): a whole checkpoint now.
	}
	c.checkpointAll(tick)
}

// checkpointAll sends a checkpoint now, of every region's stream.
func (c *cluster) checkpointAll(tick uint64) {
	r := c.r
	ck := &c.ckpt
	ck.fresh = ck.fresh[:0]
	ck.lastTick = tick
	table := r.terr.Table()
	self := r.cfg.Name
	if ck.outGrid != table.Grid() {
		// A new grid: the streams' regions are other places. Every
		// standby gets a snapshot of the new grid's regions.
		clear(ck.out)
		ck.groups = nil
		ck.outGrid = table.Grid()
	}
	// The groups' slices are kept from one checkpoint to the next (a
	// checkpoint of 5,000 entities otherwise allocates them again).
	groups := ck.groups
	if groups == nil {
		groups = make(map[cells.RegionID][]ecs.ID)
		ck.groups = groups
	}
	for reg, ids := range groups {
		if len(ids) == 0 {
			delete(groups, reg) // empty since the last checkpoint too
		} else {
			groups[reg] = ids[:0]
		}
	}
	r.pos.Each(func(id ecs.ID, p *Position) {
		if r.w.Leaving(id) || r.ghost.Has(id) || r.isGhost(id) {
			return
		}
		reg := c.homeRegion(table, p.Pos)
		groups[reg] = append(groups[reg], id)
	})
	// Every owned region, and every other one this node holds entities
	// in or has not yet told its standby it holds none in.
	regions := table.RegionsOf(self)
	for reg, ids := range groups {
		if len(ids) > 0 {
			regions = append(regions, reg)
		}
	}
	regions = append(regions, slices.Collect(maps.Keys(ck.out))...)
	slices.Sort(regions)
	regions = slices.Compact(regions)
	live := c.liveNodes()
	for _, reg := range regions {
		o := ck.out[reg]
		if table.Owner(reg) != self && len(groups[reg]) == 0 && (o == nil || len(o.sent) == 0 && !o.full) {
			delete(ck.out, reg) // a region moved away, and emptied
			continue
		}
		standby := Standby(reg, self, live)
		if standby == "" {
			delete(ck.out, reg)
			continue
		}
		if o == nil || o.standby != standby {
			o = &ckptOut{standby: standby, full: true, sent: make(map[ecs.ID]uint64)}
			ck.out[reg] = o
		}
		if ck.resendFull[standby] || o.n%ckptFullEvery == 0 {
			o.full = true
		}
		c.sendCheckpoint(tick, reg, o, groups[reg])
	}
	clear(ck.resendFull)
}

// checkpointTaken is called when this node has taken entities (a
// handoff's transfer, appended to ck.fresh): it sends them to their
// regions' standbys at once, before the source hears the ack (on the
// ordered control stream, so a source that is the region's standby too
// holds the record before it lets its frozen copy go), or leaves them
// for the end of the tick's whole checkpoint.
func (c *cluster) checkpointTaken() {
	if c.r.cfg.NoCheckpoint {
		c.ckpt.fresh = c.ckpt.fresh[:0]
		return
	}
	if c.r.Fenced() || len(c.ckpt.fresh) == 0 || c.ckpt.bugs.noTake {
		return
	}
	if tick := c.r.w.CurrentTick().N; !c.checkpointFresh(tick) {
		// One stands in a region whose stream has no snapshot at its
		// standby yet (a region move gave it this node): a whole
		// checkpoint now, still before the ack.
		c.checkpointAll(tick)
	}
}

// checkpointFresh sends, between two checkpoints, a partial delta of the
// entities this node took since the last (ck.fresh), each to its
// region's stream: the source of a handoff evicts the entity on the ack,
// and a standby adopting a dead node's regions creates only what it has
// records of, so without this an entity taken by a node that dies before
// its next checkpoint is in no checkpoint at all.
//
// It reports false, having sent nothing, when one of them stands in a
// region whose stream has no snapshot at its standby yet (the whole
// checkpoint sends one).
func (c *cluster) checkpointFresh(tick uint64) bool {
	r := c.r
	ck := &c.ckpt
	if ck.bugs.noTake {
		ck.fresh = ck.fresh[:0]
		return true
	}
	table := r.terr.Table()
	if ck.outGrid != table.Grid() {
		return false
	}
	byRegion := make(map[cells.RegionID][]ecs.ID)
	slices.Sort(ck.fresh)
	for _, id := range slices.Compact(ck.fresh) {
		p, ok := r.pos.Get(id)
		if !ok || r.w.Leaving(id) || r.ghost.Has(id) || r.isGhost(id) {
			continue
		}
		reg := c.homeRegion(table, p.Pos)
		if o := ck.out[reg]; o == nil || o.full {
			return false
		}
		byRegion[reg] = append(byRegion[reg], id)
	}
	ck.fresh = ck.fresh[:0]
	fence := c.fence()
	enc := &ck.enc
	for _, reg := range slices.Sorted(maps.Keys(byRegion)) {
		o := ck.out[reg]
		// Built as sendCheckpoint builds them, with the same hash: the
		// next delta sends them again only if they changed since.
		enc.reset()
		hashes := make([]uint64, 0, len(byRegion[reg]))
		for _, id := range byRegion[reg] {
			snap, err := c.ckptSnapshot(enc, id, c.epochOf(id), tick)
			if err != nil {
				continue // a module codec that fails: the handoff logs it
			}
			enc.add(snap)
			hashes = append(hashes, enc.hashLast(ck.seed, snap))
		}
		state := enc.states()
		for len(state) > 0 {
			n, size := 0, 0
			for n < len(state) && n < handoff.MaxEntities && (n == 0 || size+len(state[n].Bytes) <= ckptMaxBytes) {
				size += len(state[n].Bytes)
				n++
			}
			o.seq++
			m := checkpointMsg{Fence: fence, Region: uint32(reg), Seq: o.seq, Partial: true, Tick: tick, State: state[:n]}
			payload := m.Append(make([]byte, 0, 64+size))
			if !c.sendCkpt(o.standby, KindCheckpoint, payload) {
				o.full = true // the next checkpoint starts again
				break
			}
			for i, s := range state[:n] {
				o.sent[ecs.ID(s.Entity)] = hashes[i]
			}
			ck.stats.Sent++
			ck.stats.Bytes += len(payload)
			ck.stats.Entities += n
			state, hashes = state[n:], hashes[n:]
		}
	}
	return true
}

// sendCheckpoint sends one region's checkpoint to its standby: a
// snapshot when o.full, else the entities new or changed since the last
// and the ones gone; in both, the ones that moved to another region's
// stream of this node's (splitGone).
func (c *cluster) sendCheckpoint(tick uint64, reg cells.RegionID, o *ckptOut, ids []ecs.ID) {
	ck := &c.ckpt
	slices.Sort(ids)
	full := o.full
	var gone, moved []uint64
	now := o.spare
	if now == nil {
		now = make(map[ecs.ID]uint64, len(ids))
	}
	clear(now)
	enc := &ck.enc
	enc.reset()
	for _, id := range ids {
		snap, err := c.ckptSnapshot(enc, id, c.epochOf(id), tick)
		if err != nil {
			continue // a module codec that fails: the handoff logs it
		}
		enc.add(snap)
		h := enc.hashLast(ck.seed, snap)
		now[id] = h
		if prev, ok := o.sent[id]; !full && ok && prev == h {
			enc.dropLast()
		}
	}
	state := enc.states()
	gone, moved = c.splitGone(o.sent, now, full)
	// Nothing changed still sends an empty delta: it says the stream is
	// current as of this tick (the newer claim between adopters).
	fence := c.fence()
	sent := true
	for first := true; first || len(state) > 0; first = false {
		// At most MaxEntities and about ckptMaxBytes a message (the
		// link's frames are bounded): a large region goes in parts.
		n, size := 0, 0
		for n < len(state) && n < handoff.MaxEntities && (n == 0 || size+len(state[n].Bytes) <= ckptMaxBytes) {
			size += len(state[n].Bytes)
			n++
		}
		o.seq++
		m := checkpointMsg{Fence: fence, Region: uint32(reg), Seq: o.seq, Full: full && first, Tick: tick}
		if first {
			m.Gone, m.Moved = gone, moved
		}
		m.State = state[:n]
		state = state[n:]
		payload := m.Append(make([]byte, 0, 64+8*(len(m.Gone)+len(m.Moved))+size))
		if !c.sendCkpt(o.standby, KindCheckpoint, payload) {
			sent = false
			break
		}
		ck.stats.Sent++
		ck.stats.Bytes += len(payload)
		ck.stats.Entities += n
		ck.stats.Gone += len(m.Gone) + len(m.Moved)
	}
	o.n++
	if !sent {
		o.full = true // the standby missed one: start again
		return
	}
	o.full = false
	o.sent, o.spare = now, o.sent
}

// splitGone lists, sorted, the entities a stream's standby holds (sent)
// that the stream no longer carries (not in now): gone, those this node
// no longer holds (in a snapshot, which replaces everything, none), and
// moved, those it still holds, that count for another region's stream
// now. The standby keeps a moved one's record for a while: the stream
// it moved to may have another standby, and if this node dies between
// the two messages' arrivals (a checkpoint arrives in part) the old
// record is the only one.
func (c *cluster) splitGone(sent, now map[ecs.ID]uint64, full bool) (gone, moved []uint64) {
	r := c.r
	for id := range sent {
		if _, ok := now[id]; ok {
			continue
		}
		switch {
		case r.w.Alive(id) && !r.w.Leaving(id) && !r.ghost.Has(id) && !r.isGhost(id) && !c.ckpt.bugs.noMoved:
			moved = append(moved, uint64(id))
		case !full:
			gone = append(gone, uint64(id))
		}
	}
	slices.Sort(gone)
	slices.Sort(moved)
	return gone, moved
}

// sendCkpt hands a checkpoint-protocol message to the transport, and
// reports whether it took it.
func (c *cluster) sendCkpt(peer string, kind uint32, payload []byte) bool {
	if c.closed {
		return false
	}
	if err := c.tr.Send(peer, kind, payload); err != nil {
		c.stats.SendErrors++
		if kind == KindCheckpoint {
			c.ckpt.resendFull[peer] = true
		}
		return false
	}
	c.bump(func(p *Progress) { p.Queued++ })
	return true
}

// receiveCheckpoint applies one checkpoint message at the standby.
func (c *cluster) receiveCheckpoint(from string, m checkpointMsg) {
	r := c.r
	ck := &c.ckpt
	if !r.accept(from, m.Fence) {
		c.stats.Refused++
		return
	}
	table := r.terr.Table()
	reg := cells.RegionID(m.Region)
	if int(m.Region) >= table.Grid().Regions() {
		c.stats.Refused++
		return
	}
	// The fence: a stream starts only from the region's owner in the held
	// table, and goes on while its sender holds entities there (a region
	// move hands them over a share per tick), to the region's standby.
	key := ckptKey{reg, from}
	in := ck.in[key]
	if in != nil && (in.lease != m.Fence.Lease || in.grid != table.Grid()) {
		delete(ck.in, key) // a new incarnation or grid: starts again from its owner's snapshot
		in = nil
	}
	named := c.namedOwner(table, reg, from)
	if Standby(reg, from, c.liveNodes()) != r.cfg.Name {
		ck.stats.Ignored++
		return
	}
	if in == nil {
		if !m.Full {
			ck.stats.Ignored++
			return
		}
		// A sender the held table does not name is held back, not
		// ignored: it installed the table that gave it the region before
		// this node did, and its snapshot is the only one for
		// ckptFullEvery checkpoints (meanwhile the region it moved
		// entities from says they are gone).
		in = &ckptIn{owner: from, lease: m.Fence.Lease, named: named, grid: table.Grid(), recs: make(map[ecs.ID]handoff.RawSnapshot)}
		if named != from && !ck.bugs.noFence {
			in.named, in.heldBack, in.heldVer = "", true, table.Version()
		}
		ck.in[key] = in
	}
	switch {
	case m.Full:
		in.synced = true
	case !in.synced:
		ck.stats.Ignored++
		return
	case m.Seq != in.seq+1:
		in.synced = false // wait for the next snapshot
		ck.stats.Gaps++
		return
	}
	in.seq = m.Seq
	for _, id := range m.Moved {
		c.keepMoved(in, ecs.ID(id))
	}
	if !m.Partial {
		// A partial delta names only what the owner took since: the
		// rest is not current as of its tick.
		in.tick = m.Tick
		c.expireMoved(in)
	}
	if m.Full {
		in.clearRecs() // after keepMoved: a moved one's record stays
	}
	for _, id := range m.Gone {
		in.drop(ecs.ID(id))
	}
	for _, s := range m.State {
		in.put(s) // copied: a record keeps no payload alive
		in.dropMoved(ecs.ID(s.Entity))
	}
	ck.stats.Received++
}

// keepMoved keeps the record of an entity its stream says moved to
// another region's stream of the same owner, claimed at the stream's
// tick before this message: older than any record the other stream has
// of it, so an adopter holding that one wins (claims).
func (c *cluster) keepMoved(in *ckptIn, id ecs.ID) {
	s, ok := in.recs[id]
	if !ok {
		return
	}
	delete(in.recs, id) // its buffer goes with it
	if in.moved == nil {
		in.moved = make(map[ecs.ID]movedRec)
	}
	in.moved[id] = movedRec{snap: s, tick: in.tick}
}

// expireMoved drops the moved records the stream has outlived by
// ckptMovedKeep checkpoints.
func (c *cluster) expireMoved(in *ckptIn) {
	keep := uint64(ckptMovedKeep+1) * ticks(c.r.cfg.Timers.CheckpointEvery)
	for id, mv := range in.moved {
		if in.tick >= mv.tick+keep {
			in.dropMoved(id)
		}
	}
}

// namedOwner is the owner of reg that the held table names, or the one
// the table before it named if that is from (a region move in flight: the
// old owner's stream may start before the standby learns of it, and goes
// on until it has handed everything over).
func (c *cluster) namedOwner(table *cells.Table, reg cells.RegionID, from string) string {
	ck := &c.ckpt
	if ck.table == nil || ck.table.Version() != table.Version() {
		if ck.table != nil && ck.table.Grid() == table.Grid() {
			ck.prevTable = ck.table
		} else {
			ck.prevTable = nil
		}
		ck.table = table
	}
	owner := table.Owner(reg)
	if owner != from && ck.prevTable != nil && ck.prevTable.Owner(reg) == from {
		return from
	}
	return owner
}

// ckptTick runs at the end of each drain: the standby side follows the
// held table and the live members (drop, or adopt), the adoptions in
// flight end when every peer has answered, and the queries this node may
// answer now are answered.
func (c *cluster) ckptTick() {
	r := c.r
	ck := &c.ckpt
	table := r.terr.Table()
	c.namedOwner(table, 0, "") // follows the held table
	if len(ck.in) == 0 && len(ck.rounds) == 0 && len(ck.queries) == 0 && len(ck.waiters) == 0 {
		return
	}
	self := r.cfg.Name
	live := c.liveNodes()
	var adopt []ckptKey
	for k, in := range ck.in { // each stream alone: no order needed but the adoptions'
		if in.grid != table.Grid() {
			delete(ck.in, k) // a new grid: its regions are other places
			continue
		}
		owner := table.Owner(k.region)
		if in.heldBack {
			if c.namedOwner(table, k.region, in.owner) != in.owner {
				if table.Version() > in.heldVer || !c.peerLive(in.owner, in.lease) || Standby(k.region, in.owner, live) != self {
					delete(ck.in, k) // never confirmed: not this node's to adopt
				}
				continue
			}
			in.named, in.heldBack = in.owner, false
		}
		switch {
		case owner == in.owner && c.peerLive(in.owner, in.lease):
			if Standby(k.region, owner, live) != self {
				delete(ck.in, k) // the standby changed
			}
		case owner == in.owner:
			// Dead, and the table still names it: the failover table is
			// still to come.
		case !c.peerLive(in.owner, in.lease):
			// Dead, and the table gives the region to this node (the
			// failover), or to another live node (a move in flight when
			// it died: its records are the only copy; what this node
			// adopts there it hands over).
			adopt = append(adopt, k)
		case len(in.recs) == 0 || Standby(k.region, in.owner, live) != self:
			// A move: the old owner is live and has handed everything
			// there over (or streams it elsewhere now).
			delete(ck.in, k)
		}
	}
	if len(adopt) > 0 {
		slices.SortFunc(adopt, cmpCkptKey)
		c.startAdoption(table, adopt, live)
	}
	for _, k := range slices.Sorted(maps.Keys(ck.rounds)) {
		a := ck.rounds[k]
		for p := range a.waiting {
			if !slices.Contains(live, p) {
				delete(a.waiting, p) // it died too: it holds nothing any more
			}
		}
		if len(a.waiting) == 0 {
			c.finishAdoption(a)
			delete(ck.rounds, k)
		}
	}
	c.answerQueries(table)
	c.releaseWaiters()
	for id, t := range ck.restored {
		if !r.w.Alive(id) || r.w.CurrentTick().N > t+ticks(r.cfg.Timers.Went) {
			delete(ck.restored, id)
		}
	}
}

// startAdoption moves the records of dead owners' streams into a new
// round, and asks every other live node.
func (c *cluster) startAdoption(table *cells.Table, keys []ckptKey, live []string) {
	ck := &c.ckpt
	self := c.r.cfg.Name
	ck.round++
	a := &adoption{table: table.Version(), cands: make(map[ecs.ID]candidate), waiting: make(map[string]int)}
	for _, k := range keys {
		reg := k.region
		in := ck.in[k]
		delete(ck.in, k)
		if !slices.Contains(a.dead, in.owner) {
			a.dead = append(a.dead, in.owner)
		}
		for id, s := range in.recs {
			if !c.holdsNewer(id, s.Epoch) {
				a.offer(id, candidate{snap: s, tick: in.tick, region: reg, owner: in.owner})
			}
		}
		for id, mv := range in.moved {
			if !c.holdsNewer(id, mv.snap.Epoch) {
				a.offer(id, candidate{snap: mv.snap, tick: mv.tick, region: reg, owner: in.owner})
			}
		}
	}
	slices.Sort(a.dead)
	c.newestHeld(a)
	ck.stats.Rounds++
	for _, p := range live {
		if p != self && !slices.Contains(a.dead, p) && !ck.bugs.noQuery {
			a.waiting[p] = 0
		}
	}
	a.asked = slices.Sorted(maps.Keys(a.waiting))
	q := adoptQuery{Fence: c.fence(), Round: ck.round, Table: a.table, Dead: a.dead}
	entries := make([]queryEntry, 0, len(a.cands))
	for _, id := range slices.Sorted(maps.Keys(a.cands)) {
		entries = append(entries, queryEntry{Entity: uint64(id), Tick: a.cands[id].tick})
	}
	for _, p := range slices.Sorted(maps.Keys(a.waiting)) {
		// One message per maxQueryIDs candidates; the peer answers each.
		for rest := entries; ; {
			n := min(len(rest), maxQueryIDs)
			q.Entries = rest[:n]
			a.waiting[p]++
			if !c.sendCkpt(p, KindAdoptQuery, q.Append(nil)) {
				// Not taken (the transport is closing, or its queue is
				// full): the peer never answers. Adopting without it could
				// make an entity twice, so the round waits for it to die
				// (its lease) or for this node to stop.
				c.r.cfg.Logger.Warn("zone: adoption query not sent", "peer", p)
			}
			if rest = rest[n:]; len(rest) == 0 {
				break
			}
		}
	}
	ck.rounds[ck.round] = a
}

// offer makes cd the round's candidate for id unless it has a newer
// one (a later tick; on a tie the greater region).
func (a *adoption) offer(id ecs.ID, cd candidate) {
	if prev, ok := a.cands[id]; ok && (prev.tick > cd.tick || prev.tick == cd.tick && prev.region < cd.region) {
		return
	}
	a.cands[id] = cd
}

// newestHeld makes each of a round's candidates the newest record this
// node holds of it from any dead owner's stream not in the round: a
// later epoch, or from the same owner a later checkpoint tick. An entity
// that walked from one of a dead node's regions into another leaves a
// moved record (or, from a region a table then moved away, one whose
// stream stopped) behind in the first stream; if a round adopts that
// stream before the other's (a move in flight, given away while the
// other region waits for the failover table), it would restore the
// older record, and the newer one, in a later round, finds the entity
// here (zonesim kill seed 4: 25 m lost). The peers' claims order two
// adopters; this orders one adopter's own streams.
func (c *cluster) newestHeld(a *adoption) {
	ck := &c.ckpt
	if ck.bugs.noNewest {
		return
	}
	var dead []*ckptIn
	var regs []cells.RegionID
	for _, k := range slices.SortedFunc(maps.Keys(ck.in), cmpCkptKey) {
		if in := ck.in[k]; !in.heldBack && !c.peerLive(in.owner, in.lease) {
			dead, regs = append(dead, in), append(regs, k.region)
		}
	}
	if len(dead) == 0 {
		return
	}
	for id, cd := range a.cands {
		best := cd
		for i, in := range dead {
			var rec candidate
			if s, ok := in.recs[id]; ok {
				rec = candidate{snap: s, tick: in.tick, region: regs[i], owner: in.owner}
			} else if mv, ok := in.moved[id]; ok {
				rec = candidate{snap: mv.snap, tick: mv.tick, region: regs[i], owner: in.owner}
			} else {
				continue
			}
			if rec.snap.Epoch > best.snap.Epoch || rec.snap.Epoch == best.snap.Epoch && rec.owner == best.owner && rec.tick > best.tick {
				best = rec
			}
		}
		a.cands[id] = best
	}
}

// holdsNewer reports whether this node simulates id at epoch or a later
// one: a dead node's record of it at epoch is no candidate here (held
// here; superseded says why).
func (c *cluster) holdsNewer(id ecs.ID, epoch uint64) bool {
	r := c.r
	if c.ckpt.bugs.noSupersede || !r.w.Alive(id) || r.ghost.Has(id) || r.isGhost(id) || c.epochOf(id) < epoch {
		return false
	}
	c.ckpt.stats.Here++
	return true
}

// superseded drops id from every round's candidates whose record is at
// epoch or an older one: this node has just taken id at epoch (by
// handoff, or restored in another round). It may hand id on before the
// round ends, and the peers' answers are as old as the round (a round
// held up by a cut peer lasts seconds): without this the round would
// restore the stale record of an entity another node simulates now.
func (c *cluster) superseded(id ecs.ID, epoch uint64, except *adoption) {
	if c.ckpt.bugs.noSupersede {
		return
	}
	for _, a := range c.ckpt.rounds {
		if cd, ok := a.cands[id]; ok && a != except && cd.snap.Epoch <= epoch {
			delete(a.cands, id)
			c.ckpt.stats.Here++
		}
	}
}

// receiveAdoptQuery queues a query until this node may answer it.
func (c *cluster) receiveAdoptQuery(from string, q adoptQuery) {
	if !c.r.accept(from, q.Fence) {
		c.stats.Refused++
		return
	}
	c.ckpt.queries = append(c.ckpt.queries, pendingQuery{from: from, q: q})
}

// answerQueries answers every query whose table this node holds and
// whose dead nodes it refuses: it takes nothing more from them, so what
// it holds now is all it will hold of theirs.
func (c *cluster) answerQueries(table *cells.Table) {
	ck := &c.ckpt
	if len(ck.queries) == 0 {
		return
	}
	r := c.r
	kept := ck.queries[:0]
	for _, pq := range ck.queries {
		if !c.peerLive(pq.from, pq.q.Fence.Lease) {
			continue // the asker died
		}
		ready := table.Version() >= pq.q.Table
		for _, d := range pq.q.Dead {
			if l, ok := c.leaseOf[d]; ok && c.peerLive(d, l) {
				ready = false
			}
		}
		if !ready {
			kept = append(kept, pq)
			continue
		}
		c.heardFrom(pq.from, pq.q.Dead)
		ans := adoptAnswer{Fence: c.fence(), Round: pq.q.Round}
		for _, e := range pq.q.Entries {
			id := ecs.ID(e.Entity)
			c.askedAbout(pq.from, id)
			if r.w.Alive(id) && !r.ghost.Has(id) && !r.isGhost(id) || c.claims(id, e.Tick, pq.from, pq.q.Dead) {
				ans.Taken = append(ans.Taken, e.Entity)
			} else {
				c.noteHeir(pq.from, id, e.Tick) // intentfate.go
			}
		}
		c.sendCkpt(pq.from, KindAdoptAnswer, ans.Append(nil))
		ck.stats.Answered++
	}
	clear(ck.queries[len(kept):])
	ck.queries = kept
}

// claims reports whether this node adopts id under a newer claim than
// tick from asker (a later checkpoint, or on a tie the greater node
// name): in one of its rounds, or later, from a record of one of the dead
// nodes' streams that is in no round yet (the table that gives its region
// away has not reached this node; meanwhile asker adopts the regions a
// move in flight gave away: an entity that walked from one into the other
// has the newer record here). Two adopters ask each other and agree.
func (c *cluster) claims(id ecs.ID, tick uint64, asker string, dead []string) bool {
	newer := func(t uint64) bool { return t > tick || t == tick && c.r.cfg.Name > asker }
	for _, a := range c.ckpt.rounds {
		if cd, ok := a.cands[id]; ok && newer(cd.tick) {
			return true
		}
	}
	if c.ckpt.bugs.noLaterClaim {
		return false
	}
	for _, in := range c.ckpt.in {
		if in.heldBack || !slices.Contains(dead, in.owner) {
			continue
		}
		if _, ok := in.recs[id]; ok && newer(in.tick) {
			return true
		}
		if mv, ok := in.moved[id]; ok && newer(mv.tick) {
			return true
		}
	}
	return false
}

// receiveAdoptAnswer takes a peer's answer out of its round's
// candidates.
func (c *cluster) receiveAdoptAnswer(from string, m adoptAnswer) {
	if !c.r.accept(from, m.Fence) {
		c.stats.Refused++
		return
	}
	a := c.ckpt.rounds[m.Round]
	if a == nil || a.waiting[from] == 0 {
		return
	}
	for _, id := range m.Taken {
		if _, ok := a.cands[ecs.ID(id)]; ok {
			delete(a.cands, ecs.ID(id))
			c.ckpt.stats.Taken++
		}
	}
	if a.waiting[from]--; a.waiting[from] == 0 {
		delete(a.waiting, from)
	}
}

// finishAdoption creates a round's remaining candidates.
func (c *cluster) finishAdoption(a *adoption) {
	r := c.r
	ck := &c.ckpt
	byName := make(map[string]codec, len(r.codecs))
	for _, cd := range r.codecs {
		byName[cd.name] = cd
	}
	for _, id := range slices.Sorted(maps.Keys(a.cands)) {
		cd := a.cands[id]
		// A render ghost from a dead node is no sign of a live holder: it
		// is held at the fence for this adoption (a parked one outlives
		// the fence until sweepParked), and with no peer to ask the round
		// ends in the tick of the fence (zonesim TestKillSoak nodes2 seed
		// 15). Nor is one from a peer this round asked: it would have said
		// it holds the entity. That one is stale (the peer handed the
		// entity to the dead node, and its went record keeps it listed in
		// its snapshots for a while: zonesim FourWays kill seed 109) and
		// gives way to the adopted entity. restore takes either over in
		// place. A dead node is any this node refuses, not only the
		// round's: a ghost of the first of two dead nodes, held at its
		// fence, outlives the adoption of its entity by the second, whose
		// standby adopts the second's record of it (zonetest
		// TestBreakerStandbyDiesDuringAdoption gap4: 4 entities lost).
		//
		// A copy of its own frozen in a handoff it offered below the
		// record's epoch is no holder either: only the target raises
		// the epoch past the offer, by taking it, so the target took it
		// and handed it on (to the dead node) while its ack was held up
		// (a cut). The ack is as good as here: the copy becomes what
		// the ack makes it, and the record is restored over it.
		if o := c.outgoingOf(id); o != nil && o.epoch < cd.snap.Epoch && !ck.bugs.keepOffered {
			c.receiveAck(o.target, handoff.Ack{Entities: []handoff.Ref{{Entity: uint64(id), Epoch: o.epoch}}})
		}
		if src, ghost := c.sourceOf(id); r.w.Alive(id) && !r.ghost.Has(id) ||
			ghost && !c.deadSource(src, a) && !slices.Contains(a.asked, src) {
			ck.stats.Here++ // held here, or a live peer sends it
			continue
		}
		snap, err := cd.snap.Decode()
		if err != nil {
			r.cfg.Logger.Warn("zone: checkpointed entity does not decode", "entity", id, "err", err)
			continue // checked as it arrived: not seen
		}
		if c.restore(id, snap, byName) {
			c.superseded(id, snap.Epoch, a)
			ck.stats.Adopted++
			ck.restored[id] = r.w.CurrentTick().N
			ck.fresh = append(ck.fresh, id) // checkpointed at the end of the tick
		}
	}
}

// deadSource reports whether a ghost's source is a node whose lease
// this node no longer accepts: one of round a's dead owners, or one
// fenced before (an earlier failover's).
func (c *cluster) deadSource(src string, a *adoption) bool {
	if slices.Contains(a.dead, src) {
		return true
	}
	if c.ckpt.bugs.roundDeadOnly {
		return false
	}
	if c.isFenced(src) {
		return true
	}
	l, ok := c.leaseOf[src]
	return ok && !c.peerLive(src, l)
}

// restore creates one entity from its record, as a handoff's target
// creates a handed-over one, at the record's epoch raised by
// adoptEpochMargin.
func (c *cluster) restore(id ecs.ID, s handoff.Snapshot, byName map[string]codec) bool {
	r := c.r
	for _, comp := range s.Components {
		if _, ok := byName[comp.Name]; !ok && comp.Name != atName {
			r.cfg.Logger.Warn("zone: checkpointed entity has an unknown component", "entity", id, "component", comp.Name)
			return false
		}
	}
	// A ghost of it here (held at the dead node's fence, or parked) is
	// taken over in place: whoever sees it goes on seeing it, no vanish.
	filed, wasIndexed := c.takeOverGhost(id)
	if err := r.w.CreateEntity(id); err != nil {
		if wasIndexed {
			r.vis.Evict(id)
		}
		return false
	}
	for _, comp := range s.Components {
		if comp.Name == atName {
			continue
		}
		if err := byName[comp.Name].dec(id, comp.Data); err != nil {
			_ = r.w.Evict(id)
			if wasIndexed {
				r.vis.Evict(id)
			}
			r.cfg.Logger.Warn("zone: checkpointed entity does not decode", "entity", id, "err", err)
			return false
		}
	}
	epoch := s.Epoch + adoptEpochMargin
	if c.ckpt.bugs.noRaise {
		epoch = s.Epoch
	}
	c.restored(id, epoch)
	if wasIndexed {
		c.adoptedInPlace(id, filed, wasIndexed)
	} else {
		r.w.MarkMoved(id)
	}
	r.markLocalDirty(id)
	return true
}

// checkCheckpoints checks invariants 9 and 10 (the package doc).
func (c *cluster) checkCheckpoints(breach func(int, ecs.ID, string, ...any)) {
	r := c.r
	for k, in := range c.ckpt.in { // CheckInvariants sorts the breaches
		reg := k.region
		if in.heldBack {
			continue // not a standby's records yet
		}
		// 9: a stream of records started from the node the held table
		// (or the one before it) named as the region's owner.
		if in.named != in.owner {
			breach(9, 0, "(none in particular): region %d's records come from %s, whose stream started while the table named %s", reg, in.owner, in.named)
		}
		// 10: a record is never newer than the copy this node holds,
		// simulated or adopted. A copy frozen in a handoff this node
		// offered is not held to it: its ack may be held up (a cut, a
		// slow control stream) while the target takes the entity and
		// hands it on, and the next taker's record comes here, as its
		// region's standby, above the offered epoch. Only the target
		// raises the epoch past the offer, by taking it, and it answers
		// the abort with Ack then (took): the frozen copy is never
		// simulated again (testdata/scenarios/ckpt_ack_held.txt).
		for id, s := range in.recs {
			if !r.w.Alive(id) || r.ghost.Has(id) || c.isGhost(id) {
				continue
			}
			held := c.epochOf(id)
			if o := c.outgoingOf(id); o != nil {
				if !c.ckpt.bugs.strictRecords {
					continue
				}
				held = max(held, o.epoch)
			}
			if s.Epoch > held {
				breach(10, id, "has a record at epoch %d from %s above the epoch %d it is held at here", s.Epoch, in.owner, held)
			}
		}
	}
}

// receiveCkpt decodes and applies one checkpoint-protocol message.
func (c *cluster) receiveCkpt(m inMsg) error {
	switch m.kind {
	case kindCkptResend:
		c.ckpt.resendFull[m.from] = true
	case KindCheckpoint:
		cm, err := decodeCheckpoint(m.payload, c.ckpt.states)
		if err != nil {
			return err
		}
		c.receiveCheckpoint(m.from, cm)
		if cm.State != nil {
			clear(cm.State) // pins no payload
			c.ckpt.states = cm.State[:0]
		}
	case KindAdoptQuery:
		q, err := decodeAdoptQuery(m.payload)
		if err != nil {
			return err
		}
		c.receiveAdoptQuery(m.from, q)
	case KindAdoptAnswer:
		a, err := decodeAdoptAnswer(m.payload)
		if err != nil {
			return err
		}
		c.receiveAdoptAnswer(m.from, a)
	}
	return nil
}

func cmpCkptKey(a, b ckptKey) int {
	if a.region != b.region {
		return int(a.region) - int(b.region)
	}
	return strings.Compare(a.owner, b.owner)
}
