package cells

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/shardwise/shardwise/errcode"
)

// tableJSON is the wire form of a Table. Owners lists every region's node
// in RegionID order: verbose (about 2 KB for 256 regions) but trivially
// diffable by a human reading etcd, and there is one table per cluster.
type tableJSON struct {
	Version uint64     `json:"version"`
	Grid    GridConfig `json:"grid"`
	Owners  []string   `json:"owners"`
}

// MarshalJSON encodes t with its version, its full grid geometry (defaults
// written out) and the owner of every region in RegionID order.
func (t *Table) MarshalJSON() ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(tableJSON{Version: t.version, Grid: t.grid.Config(), Owners: t.Owners()})
}

// ParseTable decodes and validates a table encoded by MarshalJSON. It is
// strict, because the table is the fence against two writers: unknown,
// repeated or differently cased keys, trailing data, a grid with any field
// left out (no silent defaults), an invalid grid, a version of 0, a wrong
// number of owners and an invalid node name are all refused with an error
// that matches ErrInvalidTable. A bad grid field or owner is also an
// *errcode.ConfigError whose Field is the key path the file's author wrote
// ("grid.world.width", "owners[17]"). Callers should also check that the
// table's grid is the one they run (Grid() == their grid).
func ParseTable(data []byte) (*Table, error) {
	if err := checkKeys(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var tj tableJSON
	if err := dec.Decode(&tj); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTable, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, ErrInvalidTable.Wrap("trailing data after the table")
	}
	if tj.Grid != tj.Grid.WithDefaults() {
		return nil, ErrInvalidTable.Wrap("grid %+v leaves a field out; every field must be explicit", tj.Grid)
	}
	grid, err := NewGrid(tj.Grid)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTable, gridErrorAsKeys(err))
	}
	return NewTable(grid, tj.Version, tj.Owners)
}

// UnmarshalJSON decodes into t as ParseTable does. It exists so a Table
// can sit inside other JSON documents; it overwrites t, so use it only on
// a Table no one else holds yet.
func (t *Table) UnmarshalJSON(data []byte) error {
	parsed, err := ParseTable(data)
	if err != nil {
		return err
	}
	*t = *parsed
	return nil
}

// keySchema maps each allowed key of an object to the schema of its value;
// a nil schema is a leaf (a scalar or an array of scalars).
type keySchema map[string]keySchema

// tableKeys returns the exact key schema of the wire form. (A function, not
// a package variable, so no map is shared mutable state.)
func tableKeys() keySchema {
	return keySchema{
		"version": nil,
		"grid": keySchema{
			"world":      keySchema{"width": nil, "height": nil, "chunkEdge": nil, "slabHeight": nil},
			"regionEdge": nil,
		},
		"owners": nil,
	}
}

// checkKeys walks the JSON tokens of data and refuses any object key that
// is not spelled exactly as in tableKeys, or that repeats. encoding/json
// alone matches keys case-insensitively and lets a repeated key win, which
// would let two encodings that look different mean the same table (or two
// that look the same mean different ones).
func checkKeys(data []byte) error {
	return checkValue(json.NewDecoder(bytes.NewReader(data)), tableKeys(), "$", 0)
}

// maxNesting bounds how deep checkValue follows arrays and objects. A valid
// table nests three levels ($.grid.world.width); without a bound, input of
// a few megabytes of '[' recursed once per byte and built a path string per
// level, quadratic in time and memory (seconds to hours) before the JSON
// decoder would have refused it.
const maxNesting = 8

func checkValue(dec *json.Decoder, schema keySchema, path string, depth int) error {
	if depth > maxNesting {
		return ErrInvalidTable.Wrap("nested deeper than %d levels at %s", maxNesting, path)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTable, err)
	}
	switch tok {
	case json.Delim('{'):
		seen := make(map[string]bool, len(schema))
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidTable, err)
			}
			key, _ := kt.(string) // object keys are always strings
			sub, known := schema[key]
			switch {
			case !known:
				return ErrInvalidTable.Wrap("unknown key %q in %s", key, path)
			case seen[key]:
				return ErrInvalidTable.Wrap("key %q repeated in %s", key, path)
			}
			seen[key] = true
			if err := checkValue(dec, sub, path+"."+key, depth+1); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for dec.More() {
			if err := checkValue(dec, nil, path+"[]", depth+1); err != nil {
				return err
			}
		}
	default:
		return nil // a scalar
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return fmt.Errorf("%w: %w", ErrInvalidTable, err)
	}
	return nil
}

// gridErrorAsKeys renames the field of NewGrid's configuration error to the
// keys of the JSON form ("grid.world.width", not "World.Width"): a table
// that fails here was written by someone as a file, and those keys are what
// they wrote. Other errors are returned unchanged.
func gridErrorAsKeys(err error) error {
	var ce *errcode.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	keys := []string{"grid"}
	t := reflect.TypeFor[GridConfig]()
	for name := range strings.SplitSeq(ce.Field, ".") {
		key := name
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := t.FieldByName(name); ok {
				if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" {
					key = tag
				}
				t = f.Type
			} else {
				t = nil
			}
		}
		keys = append(keys, key)
	}
	return errcode.Config(strings.Join(keys, "."), ce.Value, ce.Reason)
}
