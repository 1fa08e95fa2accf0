package dashboard

import (
	"time"

	"github.com/shardwise/shardwise/ecs"
	"github.com/shardwise/shardwise/zone"
)

// Snapshot is the state the page draws (served as JSON at /snapshot.json
// and streamed at /events). Positions are in metres, x east and y north,
// normalised onto the torus; entity ids are decimal strings (JavaScript
// numbers hold 53 bits, an id 64).
type Snapshot struct {
	// At is the collector's clock at the snapshot; Version grows with
	// every change the collector took in.
	At      time.Time `json:"at"`
	Version uint64    `json:"version"`
	// Window is how many seconds the tick percentiles cover; SampleEvery
	// how many seconds lie between a node's entity samples.
	Window      float64 `json:"window"`
	SampleEvery float64 `json:"sampleEvery"`
	World       World   `json:"world"`
	Bands       Bands   `json:"bands"`
	// TableVersion and Regions are the newest region table any node
	// holds; Owners every node name in it or reporting, sorted (the
	// legend's order: a node keeps its colour when regions move).
	TableVersion uint64      `json:"tableVersion"`
	Regions      []Region    `json:"regions"`
	Owners       []string    `json:"owners"`
	Nodes        []NodeStats `json:"nodes"`
	// Entities are every node's simulated entities at its last sample,
	// but for a stale node's.
	Entities []Entity `json:"entities"`
	// Handoffs are those seen in the last KeepHandoffs, oldest first.
	Handoffs []Handoff `json:"handoffs"`
	// RegionChanges are the regions whose owner changed from one table
	// to the next (a region move, a failover) in the last KeepHandoffs,
	// oldest first.
	RegionChanges []RegionChange `json:"regionChanges"`
	Econ          []EconNode     `json:"econ"`
	Events        []Event        `json:"events"`
}

// World is the torus and its region grid.
type World struct {
	Width      float64 `json:"width"`
	Height     float64 `json:"height"`
	RegionEdge float64 `json:"regionEdge"`
	Cols       int     `json:"cols"`
	Rows       int     `json:"rows"`
}

// Bands are the border widths in metres (cells.Bands, as the runtimes
// run with them): render ghosts within Ghost of a node's regions,
// simulation ghosts within Interaction, handoff past HandoffMargin.
type Bands struct {
	Ghost         float64 `json:"ghost"`
	Interaction   float64 `json:"interaction"`
	HandoffMargin float64 `json:"handoffMargin"`
}

// Region is one region of the table: its bounds [MinX, MaxX) × [MinY,
// MaxY) and owner.
type Region struct {
	ID    int     `json:"id"`
	Col   int     `json:"col"`
	Row   int     `json:"row"`
	Owner string  `json:"owner"`
	MinX  float64 `json:"minX"`
	MinY  float64 `json:"minY"`
	MaxX  float64 `json:"maxX"`
	MaxY  float64 `json:"maxY"`
}

// Entity is one simulated entity at its node's last sample.
type Entity struct {
	id   ecs.ID
	ID   string  `json:"id"`
	Node string  `json:"node"`
	Kind string  `json:"kind"`
	X    float64 `json:"x"`
	Y    float64 `json:"y"`
}

// Handoff is an entity seen on node From and then on node To, at X, Y
// (where To's sample found it) when To's sample was taken.
type Handoff struct {
	ID   string    `json:"id"`
	Kind string    `json:"kind"`
	From string    `json:"from"`
	To   string    `json:"to"`
	X    float64   `json:"x"`
	Y    float64   `json:"y"`
	At   time.Time `json:"at"`
}

// RegionChange is a region given by table Version to To, which the table
// before gave to From, as the collector first saw that table (At).
type RegionChange struct {
	Region  int       `json:"region"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Version uint64    `json:"version"`
	At      time.Time `json:"at"`
}

// NodeStats are one zone node's numbers at its last report.
type NodeStats struct {
	Name string `json:"name"`
	Tick uint64 `json:"tick"`
	// Stale is true when the node has not reported for the collector's
	// Stale duration (stopped, killed, fenced).
	Stale bool `json:"stale"`
	// Down is set once the caller declared the node down (Collector.
	// NodeDown), DownWhy saying why ("killed"): its regions are drawn as
	// dead until their new owner is in the table.
	Down    bool   `json:"down"`
	DownWhy string `json:"downWhy,omitempty"`
	// TickP50ms, TickP99ms and TickMaxMs are the step's wall time over
	// the window (TickSamples ticks), in milliseconds.
	TickP50ms   float64 `json:"tickP50ms"`
	TickP99ms   float64 `json:"tickP99ms"`
	TickMaxMs   float64 `json:"tickMaxMs"`
	TickSamples int     `json:"tickSamples"`
	// Simulated and Frozen are the report's census; Entities how many the
	// last sample held (the simulated ones).
	Simulated int `json:"simulated"`
	Frozen    int `json:"frozen"`
	Entities  int `json:"entities"`
	// RenderGhosts and SimGhosts are the other nodes' entities the node
	// holds: replicas, and the real marked entities of the interaction
	// band.
	RenderGhosts int    `json:"renderGhosts"`
	SimGhosts    int    `json:"simGhosts"`
	OwnedRegions int    `json:"ownedRegions"`
	TableVersion uint64 `json:"tableVersion"`
	Peers        int    `json:"peers"`
	Connected    int    `json:"connected"`
	// Sessions is the clients the node's gateway serves.
	Sessions int `json:"sessions"`
	// LinkIn and LinkOut count link messages (control messages and
	// replication batches, all peers) since the node started;
	// LinkInPerSec and LinkOutPerSec are their rates between the last two
	// samples.
	LinkIn        uint64  `json:"linkIn"`
	LinkOut       uint64  `json:"linkOut"`
	LinkInPerSec  float64 `json:"linkInPerSec"`
	LinkOutPerSec float64 `json:"linkOutPerSec"`
	// Handoff is the runtime's own handoff counters; HandoffsSeenIn and
	// HandoffsSeenOut the handoffs the collector saw, to and from the node.
	Handoff         zone.HandoffStats `json:"handoff"`
	HandoffsSeenIn  int               `json:"handoffsSeenIn"`
	HandoffsSeenOut int               `json:"handoffsSeenOut"`
}

// EconNode is an economy node's last stats, with the movements (accepted
// and rejected) a second between its last two pushes.
type EconNode struct {
	EconStats
	MovementsPerSec float64 `json:"movementsPerSec"`
	Stale           bool    `json:"stale"`
}

// Event is an announced moment.
type Event struct {
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}
