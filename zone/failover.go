package zone

// Standby and PlanFailover are the pure part of failover: which node
// takes a dead node's regions. The controller that writes the new table
// to etcd (RunFailover) is package zone/zonecoord's.

import (
	"strconv"

	"github.com/shardwise/shardwise/cells"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/rendezvous"
)

// CodeNoStandby is ErrNoStandby's stable code.
const CodeNoStandby = "ZONE.NO_STANDBY"

// ErrNoStandby: a region of a node that left has no live zone node to take
// it (PlanFailover with no live node).
var ErrNoStandby = errcode.New(CodeNoStandby, "zone: no live zone node to take the region")

// standbyKey is the rendezvous key of region r: every node hashes the
// same string, so every node derives the same standby.
func standbyKey(r cells.RegionID) string { return "region/" + strconv.Itoa(int(r)) }

// Standby returns the node that takes region r over if its owner dies: of
// the live nodes other than owner, the one with the highest rendezvous
// score for the region (rendezvous.Score; on a tie, the smaller name). It
// is derived, never stored: every node that knows the live members
// computes the same standby, whatever order it lists them in. A dead
// node's regions spread over the survivors as rendezvous spreads keys, and
// removing a node changes the standby only of the regions it was standby
// for. It returns "" if no live node other than owner exists.
func Standby(r cells.RegionID, owner string, live []string) string {
	key := standbyKey(r)
	var (
		best      string
		bestScore uint64
	)
	for _, n := range live {
		if n == owner {
			continue
		}
		s := rendezvous.Score(n, key)
		if best == "" || s > bestScore || (s == bestScore && n < best) {
			best, bestScore = n, s
		}
	}
	return best
}

// PlanFailover returns the table that follows t when the nodes in gone have
// left: version t.Version()+1, every region a node of gone owns given to
// its Standby among live, every other region unchanged; and the regions
// each gone node lost. It returns a nil table when no node of gone owns a
// region (nothing to do). A node both in gone and in live is live (it came
// back) and keeps its regions. It is a pure function: the controller and
// the tests call it alike.
func PlanFailover(t *cells.Table, live, gone []string) (*cells.Table, map[string][]cells.RegionID, error) {
	isLive := make(map[string]bool, len(live))
	for _, n := range live {
		isLive[n] = true
	}
	changes := map[cells.RegionID]string{}
	moved := map[string][]cells.RegionID{}
	for _, dead := range gone {
		if isLive[dead] {
			continue
		}
		for _, r := range t.RegionsOf(dead) {
			to := Standby(r, dead, live)
			if to == "" {
				return nil, nil, ErrNoStandby.Wrap("region %d of %q: no live zone node to take it", r, dead)
			}
			changes[r] = to
			moved[dead] = append(moved[dead], r)
		}
	}
	if len(changes) == 0 {
		return nil, nil, nil
	}
	next, err := t.WithOwners(t.Version()+1, changes)
	if err != nil {
		return nil, nil, err
	}
	return next, moved, nil
}
