package entityid

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/shardwise/shardwise/clock"
	"github.com/shardwise/shardwise/errcode"
)

// Layout of an id, most significant bits first: time | node | sequence.
const (
	TimeBits = 45
	NodeBits = 8
	SeqBits  = 11

	// MaxNode is the largest node part.
	MaxNode = 1<<NodeBits - 1
	// MaxSeq is the largest sequence number within one millisecond.
	MaxSeq = 1<<SeqBits - 1
	// MaxMillis is the largest millisecond offset from Epoch that fits.
	MaxMillis = 1<<TimeBits - 1

	// EpochUnixMilli is 2024-01-01T00:00:00Z in Unix milliseconds.
	EpochUnixMilli = 1704067200000

	nodeShift = SeqBits
	timeShift = SeqBits + NodeBits
)

// Epoch returns the instant that millisecond 0 of an id stands for.
func Epoch() time.Time { return time.UnixMilli(EpochUnixMilli).UTC() }

// ID is a snowflake entity id. Every uint64 decodes to some (time, node,
// seq); the zero ID is Epoch, node 0, sequence 0.
type ID uint64

// Millis returns the id's milliseconds since Epoch.
func (id ID) Millis() int64 { return int64(uint64(id) >> timeShift) }

// Time returns the millisecond in which the id was minted, in UTC.
func (id ID) Time() time.Time { return time.UnixMilli(EpochUnixMilli + id.Millis()).UTC() }

// Node returns the node part.
func (id ID) Node() uint8 { return uint8(uint64(id) >> nodeShift) }

// Seq returns the sequence number within the millisecond.
func (id ID) Seq() uint16 { return uint16(uint64(id) & MaxSeq) }

// String returns the id in decimal, the form Parse reads.
func (id ID) String() string { return strconv.FormatUint(uint64(id), 10) }

// Make assembles an id from its parts; it refuses parts out of range.
func Make(millis int64, node, seq int) (ID, error) {
	if millis < 0 || millis > MaxMillis {
		return 0, ErrTimeOutOfRange.Wrap("millis %d outside [0, %d]", millis, int64(MaxMillis))
	}
	if node < 0 || node > MaxNode {
		return 0, ErrPartOutOfRange.Wrap("node %d outside [0, %d]", node, MaxNode)
	}
	if seq < 0 || seq > MaxSeq {
		return 0, ErrPartOutOfRange.Wrap("seq %d outside [0, %d]", seq, MaxSeq)
	}
	return ID(uint64(millis)<<timeShift | uint64(node)<<nodeShift | uint64(seq)), nil
}

// Parse reads an id written by String. Every 64-bit value is a well-formed
// id, so only syntax and range are checked.
func Parse(s string) (ID, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, ErrSyntax.Wrap("%q", s)
	}
	return ID(v), nil
}

// Errors.
var (
	// ErrTimeOutOfRange: the clock reads before Epoch or past the 45-bit range.
	ErrTimeOutOfRange = errcode.New("ENTITYID.TIME_OUT_OF_RANGE", "entityid: time outside the id range")
	// ErrPartOutOfRange: a node or sequence part given to Make does not fit.
	ErrPartOutOfRange = errcode.New("ENTITYID.PART_OUT_OF_RANGE", "entityid: part out of range")
	// ErrSequenceExhausted: TryNext found all 2048 ids of this millisecond
	// spent; Next would wait for the next millisecond instead.
	ErrSequenceExhausted = errcode.New("ENTITYID.SEQUENCE_EXHAUSTED", "entityid: sequence exhausted for this millisecond")
	// ErrSyntax: Parse was given something that is not a decimal uint64.
	ErrSyntax = errcode.New("ENTITYID.SYNTAX", "entityid: not a decimal id")
)

// Config configures a Generator.
type Config struct {
	// Node is the leased node part, 0–255. There is no default: a node
	// that has no lease must not mint ids.
	Node int
	// Clock is the wall clock; nil means clock.Real(). It is read at every
	// mint, so a generator starts from the wall time at boot, and a node
	// restarted with the same node part mints only ids after those of its
	// previous run, provided its clock then reads later than it ever did
	// in that run (the package doc says why that is enough).
	Clock clock.Clock
}

// Validate reports a node part out of range.
func (c Config) Validate() error {
	if c.Node < 0 || c.Node > MaxNode {
		return errcode.Config("Node", c.Node, fmt.Sprintf("must be within [0, %d]", MaxNode))
	}
	return nil
}

// Generator mints strictly increasing ids for one node part. It is safe for
// concurrent use; callers are served one at a time.
type Generator struct {
	node  uint64
	clock clock.Clock
	// turn is a one-slot semaphore rather than a mutex so that a caller
	// waiting for its turn can give up with its context. It is held only
	// while one id is minted, never across an overflow wait.
	turn chan struct{}
	// Guarded by turn.
	lastMillis int64 // -1 before the first id; never decreases
	seq        int
}

// NewGenerator validates cfg and returns a Generator.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Generator{
		node:       uint64(cfg.Node),
		clock:      clock.OrReal(cfg.Clock),
		turn:       make(chan struct{}, 1),
		lastMillis: -1,
	}, nil
}

// Node returns the generator's node part.
func (g *Generator) Node() uint8 { return uint8(g.node) }

// Next returns a new id. When this millisecond's sequence is spent it waits,
// on the injected clock, for the next millisecond, or until ctx is done.
// It does not hold the generator while it waits, so TryNext (and other
// callers) are never stuck behind an overflow wait.
func (g *Generator) Next(ctx context.Context) (ID, error) {
	for {
		select {
		case g.turn <- struct{}{}:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		id, wait, err := g.mint()
		<-g.turn
		if err == nil || wait == 0 {
			return id, err
		}
		if err := clock.Sleep(ctx, g.clock, wait); err != nil {
			return 0, err
		}
	}
}

// TryNext returns a new id, or ErrSequenceExhausted without waiting when
// this millisecond's sequence is spent.
func (g *Generator) TryNext() (ID, error) {
	g.turn <- struct{}{}
	defer func() { <-g.turn }()
	id, _, err := g.mint()
	return id, err
}

// mint makes one id. When the sequence is spent it returns
// ErrSequenceExhausted and how long to wait, on the clock, until it reads
// the millisecond after the last one used (always > 0); every other error
// has wait == 0. The caller holds turn.
func (g *Generator) mint() (id ID, wait time.Duration, err error) {
	now := g.clock.Now()
	ms := now.UnixMilli() - EpochUnixMilli
	if ms < 0 || ms > MaxMillis {
		return 0, 0, ErrTimeOutOfRange.Wrap("clock reads %s", now.UTC().Format(time.RFC3339Nano))
	}
	// A clock that reads earlier than the last millisecond used is held at
	// that millisecond: ids go on rising in its sequence, and never claim a
	// millisecond the clock has not yet read.
	ms = max(ms, g.lastMillis)
	if ms == g.lastMillis {
		if g.seq == MaxSeq {
			next := time.UnixMilli(EpochUnixMilli + ms + 1)
			wait = next.Sub(now)
			if wait <= 0 { // a reading inside ms never reaches ms+1; guard anyway
				wait = time.Nanosecond
			}
			return 0, wait, ErrSequenceExhausted
		}
		g.seq++
	} else {
		g.lastMillis = ms
		g.seq = 0
	}
	return ID(uint64(ms)<<timeShift | g.node<<nodeShift | uint64(g.seq)), 0, nil
}
