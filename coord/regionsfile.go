package coord

import (
	"bytes"
	"encoding/json"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/shardwise/shardwise/cells"
)

// MaxRegionsFile bounds a region table file. A 256-region table is about
// 3 KB; the largest grid cells allows is far bigger, but an operator file
// beyond this is a mistake, not a table.
const MaxRegionsFile = 16 << 20

// ParseRegionsFile decodes a region table written by an operator, in JSON
// (cells' form, as `shardwise regions show` prints it) or the same document
// in YAML. YAML is converted to JSON and then parsed by cells.ParseTable, so
// both go through one strict decoder. Owners that YAML reads as numbers or
// booleans (owner: 7) are taken as the names they spell.
func ParseRegionsFile(data []byte) (*cells.Table, error) {
	if len(data) > MaxRegionsFile {
		return nil, ErrRegionsInvalid.Wrap("file of %d bytes exceeds %d", len(data), MaxRegionsFile)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, ErrRegionsInvalid.Wrap("the file is empty")
	}
	js := trimmed
	// JSON is parsed as is; anything else, including a YAML flow mapping
	// that merely starts with '{', goes through the YAML conversion.
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		var err error
		js, err = yamlToJSON(trimmed)
		if err != nil {
			return nil, err
		}
	}
	t, err := cells.ParseTable(js)
	if err != nil {
		return nil, invalidTable(err)
	}
	return t, nil
}

// FormatRegions renders t for an operator: indented JSON, or YAML when
// asYAML. Either form parses back with ParseRegionsFile to an equal table.
func FormatRegions(t *cells.Table, asYAML bool) ([]byte, error) {
	js, err := t.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if !asYAML {
		var buf bytes.Buffer
		if err := json.Indent(&buf, js, "", "  "); err != nil {
			return nil, err
		}
		buf.WriteByte('\n')
		return buf.Bytes(), nil
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(jsonNumbersForYAML(doc)); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// jsonNumbersForYAML turns json.Number into int64 (all numbers in a table
// are integers) so YAML prints them bare, not quoted.
func jsonNumbersForYAML(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		for k, e := range x {
			x[k] = jsonNumbersForYAML(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = jsonNumbersForYAML(e)
		}
		return x
	default:
		return v
	}
}

// yamlToJSON converts one YAML document to JSON. Only what JSON can say is
// accepted: mappings with string keys, sequences, and scalars.
func yamlToJSON(data []byte) ([]byte, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, ErrRegionsInvalid.Wrap("not JSON, and not YAML: %v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, ErrRegionsInvalid.Wrap("the file holds more than one YAML document")
	}
	v, err := yamlValue(&doc, false, 0)
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, ErrRegionsInvalid.Wrap("YAML has no JSON form: %v", err)
	}
	return js, nil
}

// maxYAMLDepth bounds nesting; a table is three levels deep.
const maxYAMLDepth = 32

// yamlValue converts a YAML node to a JSON-ready value. asName makes
// scalars strings (used for the owners list).
func yamlValue(n *yaml.Node, asName bool, depth int) (any, error) {
	if depth > maxYAMLDepth {
		return nil, ErrRegionsInvalid.Wrap("YAML nested deeper than %d", maxYAMLDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, ErrRegionsInvalid.Wrap("empty YAML document")
		}
		return yamlValue(n.Content[0], false, depth+1)
	case yaml.AliasNode:
		return nil, ErrRegionsInvalid.Wrap("line %d: YAML aliases are not accepted in a region table", n.Line)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return nil, ErrRegionsInvalid.Wrap("line %d: mapping keys must be plain strings", k.Line)
			}
			if _, dup := m[k.Value]; dup {
				return nil, ErrRegionsInvalid.Wrap("line %d: key %q appears twice", k.Line, k.Value)
			}
			val, err := yamlValue(v, k.Value == "owners", depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = val
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, e := range n.Content {
			val, err := yamlValue(e, asName, depth+1)
			if err != nil {
				return nil, err
			}
			s[i] = val
		}
		return s, nil
	case yaml.ScalarNode:
		if asName {
			return n.Value, nil
		}
		switch n.ShortTag() {
		case "!!str":
			return n.Value, nil
		case "!!int":
			i, err := strconv.ParseInt(n.Value, 0, 64)
			if err != nil {
				u, uerr := strconv.ParseUint(n.Value, 0, 64)
				if uerr != nil {
					return nil, ErrRegionsInvalid.Wrap("line %d: integer %q: %v", n.Line, n.Value, err)
				}
				return u, nil
			}
			return i, nil
		case "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil {
				return nil, ErrRegionsInvalid.Wrap("line %d: number %q: %v", n.Line, n.Value, err)
			}
			return f, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, ErrRegionsInvalid.Wrap("line %d: %v", n.Line, err)
			}
			return b, nil
		case "!!null":
			return nil, nil
		default:
			return nil, ErrRegionsInvalid.Wrap("line %d: YAML tag %s is not accepted", n.Line, n.ShortTag())
		}
	default:
		return nil, ErrRegionsInvalid.Wrap("line %d: unexpected YAML node", n.Line)
	}
}
