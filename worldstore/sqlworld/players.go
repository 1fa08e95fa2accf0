package sqlworld

import (
	"context"
	"database/sql"
	"errors"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/worldstore"
)

// LoadPlayer implements worldstore.Players.
func (s *Store) LoadPlayer(ctx context.Context, id account.ID) (worldstore.Player, error) {
	if err := worldstore.ValidateAccount("account", id); err != nil {
		return worldstore.Player{}, err
	}
	if err := s.live(); err != nil {
		return worldstore.Player{}, err
	}
	p := worldstore.Player{Account: id}
	var epoch, saved int64
	var final int16
	err := s.retry(ctx, func() error {
		return s.rdb.QueryRowContext(ctx, s.d.q(`SELECT epoch, x, y, z, state, saved_at, final_save FROM world_players WHERE account = ?`), int64(id)).
			Scan(&epoch, &p.Pos.X, &p.Pos.Y, &p.Pos.Z, &p.State, &saved, &final)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return worldstore.Player{}, worldstore.ErrNotFound.Wrap("account %s", id)
	}
	if err != nil {
		return worldstore.Player{}, s.fail("load player", err)
	}
	p.Epoch = uint64(epoch)
	p.Final = final != 0
	p.State = orNil(p.State)
	p.Saved = fromMicros(saved)
	return p, nil
}

// savePlayer is the fenced upsert: the update applies only when the stored
// epoch is below the caller's, or equal and the stored record not final
// (invariant 1 of package worldstore).
const savePlayer = `INSERT INTO world_players (account, epoch, x, y, z, state, final_save, saved_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, {now})
	ON CONFLICT (account) DO UPDATE SET
		epoch = excluded.epoch, x = excluded.x, y = excluded.y, z = excluded.z,
		state = excluded.state, final_save = excluded.final_save, saved_at = excluded.saved_at
	WHERE world_players.epoch < excluded.epoch
		OR (world_players.epoch = excluded.epoch AND world_players.final_save = 0)`

// SavePlayer implements worldstore.Players.
func (s *Store) SavePlayer(ctx context.Context, p worldstore.Player) error {
	if err := worldstore.ValidatePlayer(p); err != nil {
		return err
	}
	if err := s.live(); err != nil {
		return err
	}
	var stale *worldstore.StaleEpochError
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		stale = nil
		final := 0
		if p.Final {
			final = 1
		}
		res, err := tx.ExecContext(ctx, s.d.q(savePlayer),
			int64(p.Account), int64(p.Epoch), p.Pos.X, p.Pos.Y, p.Pos.Z, nonNil(p.State), final)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n > 0 {
			return err
		}
		var stored int64
		var storedFinal int16
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT epoch, final_save FROM world_players WHERE account = ?`), int64(p.Account)).Scan(&stored, &storedFinal); err != nil {
			return err
		}
		stale = &worldstore.StaleEpochError{Account: p.Account, Epoch: p.Epoch, Stored: uint64(stored), Final: storedFinal != 0 && uint64(stored) == p.Epoch}
		return nil
	})
	if err != nil {
		return s.fail("save player", err)
	}
	if stale != nil {
		return stale
	}
	return nil
}
