package zonesim

import (
	"fmt"
	"strconv"
	"strings"
)

// Step is one command of a scenario script with the output it expects,
// in the shape of etcd-io/raft's datadriven tests:
//
//	# a comment, kept with the step that follows
//	command key=value key=v1,v2
//	----
//	expected output, up to a blank line
//
// Comments and blank lines between steps are kept for the rewrite.
type Step struct {
	Pos      string // "file:line" of the command
	Comment  string // the lines before the command (comments, blanks)
	Command  string // the command line as written
	Name     string // its first word
	Args     []Arg
	Expected string // what follows "----", without its last newline
}

// Arg is one key=value (or bare key) of a command.
type Arg struct {
	Key  string
	Vals []string
}

// ParseScript reads a script; name is its path, for positions.
func ParseScript(name, text string) ([]Step, string, error) {
	lines := strings.Split(text, "\n")
	var steps []Step
	var comment []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			comment = append(comment, line)
			continue
		}
		st := Step{Pos: fmt.Sprintf("%s:%d", name, i+1), Comment: strings.Join(comment, "\n"), Command: t}
		comment = nil
		fields := strings.Fields(t)
		st.Name = fields[0]
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			a := Arg{Key: k}
			if ok {
				a.Vals = strings.Split(v, ",")
			}
			st.Args = append(st.Args, a)
		}
		i++
		if i >= len(lines) || strings.TrimSpace(lines[i]) != "----" {
			return nil, "", fmt.Errorf("%s: a command must be followed by ----", st.Pos)
		}
		var out []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		st.Expected = strings.Join(out, "\n")
		steps = append(steps, st)
	}
	return steps, strings.Join(comment, "\n"), nil
}

// FormatScript writes steps back, each with the output got (or its own
// expected one), and the trailing comment: the rewrite.
func FormatScript(steps []Step, got []string, tail string) string {
	var b strings.Builder
	for i, st := range steps {
		if st.Comment != "" {
			b.WriteString(st.Comment)
			b.WriteByte('\n')
		}
		out := st.Expected
		if i < len(got) {
			out = got[i]
		}
		b.WriteString(st.Command)
		b.WriteString("\n----\n")
		if out != "" {
			b.WriteString(out)
			b.WriteByte('\n')
		}
		if i < len(steps)-1 || tail != "" {
			b.WriteByte('\n')
		}
	}
	if tail = strings.TrimLeft(tail, "\n"); tail != "" {
		b.WriteString(tail)
		b.WriteByte('\n')
	}
	return b.String()
}

// Has reports whether the step has key (bare or with a value).
func (s Step) Has(key string) bool {
	for _, a := range s.Args {
		if a.Key == key {
			return true
		}
	}
	return false
}

// Vals returns key's values (nil if absent).
func (s Step) Vals(key string) []string {
	for _, a := range s.Args {
		if a.Key == key {
			return a.Vals
		}
	}
	return nil
}

// Str returns key's one value, or def.
func (s Step) Str(key, def string) string {
	if v := s.Vals(key); len(v) > 0 {
		return v[0]
	}
	return def
}

// Int returns key's one value as an integer, or def.
func (s Step) Int(key string, def int) (int, error) {
	v := s.Vals(key)
	if len(v) == 0 {
		return def, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil {
		return 0, fmt.Errorf("%s=%s: %w", key, v[0], err)
	}
	return n, nil
}

// Floats returns key's values as numbers.
func (s Step) Floats(key string) ([]float64, error) {
	var out []float64
	for _, v := range s.Vals(key) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", key, v, err)
		}
		out = append(out, f)
	}
	return out, nil
}
