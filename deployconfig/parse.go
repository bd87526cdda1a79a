package deployconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds the values one document may expand to through YAML
// aliases, so a small file of nested aliases cannot exhaust memory.
const maxNodes = 1_000_000

// cfnTags maps each CloudFormation short-form tag to the key of its long form.
var cfnTags = map[string]string{
	"!Ref":              "Ref",
	"!Condition":        "Condition",
	"!Base64":           "Fn::Base64",
	"!Cidr":             "Fn::Cidr",
	"!FindInMap":        "Fn::FindInMap",
	"!GetAtt":           "Fn::GetAtt",
	"!GetAZs":           "Fn::GetAZs",
	"!ImportValue":      "Fn::ImportValue",
	"!Join":             "Fn::Join",
	"!Length":           "Fn::Length",
	"!Select":           "Fn::Select",
	"!Split":            "Fn::Split",
	"!Sub":              "Fn::Sub",
	"!ToJsonString":     "Fn::ToJsonString",
	"!Transform":        "Fn::Transform",
	"!And":              "Fn::And",
	"!Equals":           "Fn::Equals",
	"!If":               "Fn::If",
	"!Not":              "Fn::Not",
	"!Or":               "Fn::Or",
	"!ForEach":          "Fn::ForEach",
	"!EachMemberIn":     "Fn::EachMemberIn",
	"!RefAll":           "Fn::RefAll",
	"!ValueOf":          "Fn::ValueOf",
	"!ValueOfAll":       "Fn::ValueOfAll",
	"!Contains":         "Fn::Contains",
	"!EachMemberEquals": "Fn::EachMemberEquals",
}

// document is a parsed file: its value in the shapes the JSON Schema library
// reads, and where each value and each mapping key starts in the file.
type document struct {
	value any
	pos   map[string]Position // JSON pointer -> start of the value
	key   map[string]Position // JSON pointer -> start of its key, for mapping members
	// problems found while reading that are not syntax errors: duplicate
	// keys, unknown tags, keys that are not strings.
	problems []Problem
}

// position of the value at ptr, or of its key when the value is a collection
// (its own position is that of its first entry, a line too far).
func (d *document) at(ptr string) Position {
	if p, ok := d.key[ptr]; ok {
		if _, coll := lookup(d.value, ptr); coll {
			return p
		}
	}
	if p, ok := d.pos[ptr]; ok {
		return p
	}
	return Position{}
}

// lookup reports whether the value at ptr is an object or an array.
func lookup(v any, ptr string) (any, bool) {
	if ptr != "" {
		for _, tok := range strings.Split(ptr[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch c := v.(type) {
			case map[string]any:
				v = c[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(c) {
					return nil, false
				}
				v = c[i]
			default:
				return nil, false
			}
		}
	}
	switch v.(type) {
	case map[string]any, []any:
		return v, true
	}
	return v, false
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// parseYAML reads one YAML document (JSON is read the same way: it is YAML).
func parseYAML(data []byte) (*document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return &document{value: nil, pos: map[string]Position{"": {1, 1}}, key: map[string]Position{}}, nil
		}
		return nil, yamlSyntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlSyntaxError(err)
		}
		return nil, &SyntaxError{Pos: Position{extra.Line, extra.Column}, Msg: "the file holds more than one YAML document; a configuration is one document"}
	}
	c := converter{doc: &document{pos: map[string]Position{}, key: map[string]Position{}}}
	v, err := c.convert(&root, "", 0)
	if err != nil {
		return nil, err
	}
	c.doc.value = v
	return c.doc, nil
}

func yamlSyntaxError(err error) *SyntaxError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	se := &SyntaxError{Msg: msg}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		se.Pos.Line, _ = strconv.Atoi(m[1])
		se.Msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(msg, m[0]), ":"))
	}
	return se
}

// parseJSON checks the JSON syntax with encoding/json (so the errors are
// JSON's, with a line and column) and then reads the value with positions.
func parseJSON(data []byte) (*document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			off := dec.InputOffset()
			return nil, &SyntaxError{Pos: offsetPos(data, off), Msg: "data after the JSON value"}
		}
	}
	if err != nil {
		var syn *json.SyntaxError
		switch {
		case errors.As(err, &syn):
			return nil, &SyntaxError{Pos: offsetPos(data, syn.Offset), Msg: syn.Error()}
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, &SyntaxError{Pos: offsetPos(data, int64(len(data))), Msg: "unexpected end of JSON input"}
		default:
			return nil, &SyntaxError{Msg: err.Error()}
		}
	}
	// Valid JSON: read it again as YAML to learn where each value is. Should
	// the YAML reader disagree on some JSON, keep the JSON value without
	// positions rather than fail.
	if doc, yerr := parseYAML(data); yerr == nil {
		return doc, nil
	}
	return &document{value: v, pos: map[string]Position{"": {1, 1}}, key: map[string]Position{}}, nil
}

func offsetPos(data []byte, off int64) Position {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return Position{Line: line, Column: col}
}

type converter struct {
	doc   *document
	nodes int
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func (c *converter) problem(n *yaml.Node, ptr, msg string) {
	c.doc.problems = append(c.doc.problems, Problem{Pointer: ptr, Pos: Position{n.Line, n.Column}, Message: msg})
}

func (c *converter) convert(n *yaml.Node, ptr string, depth int) (any, error) {
	c.nodes++
	if c.nodes > maxNodes || depth > 1000 {
		return nil, &SyntaxError{Pos: Position{n.Line, n.Column}, Msg: "the document expands to too many values (aliases nested too deep?)"}
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			c.doc.pos[ptr] = Position{1, 1}
			return nil, nil
		}
		return c.convert(n.Content[0], ptr, depth+1)
	}
	if _, ok := c.doc.pos[ptr]; !ok {
		c.doc.pos[ptr] = Position{n.Line, n.Column}
	}
	if n.Kind == yaml.AliasNode {
		return c.convert(n.Alias, ptr, depth+1)
	}
	tag := n.Tag
	if strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
		long, ok := cfnTags[tag]
		if !ok {
			c.problem(n, ptr, fmt.Sprintf("unknown YAML tag %s (the CloudFormation short forms such as !Ref, !GetAtt, !Sub and !Join are known)", tag))
			return c.untagged(n, ptr, depth)
		}
		inner := ptr + "/" + escapeToken(long)
		var v any
		var err error
		if n.Kind == yaml.ScalarNode {
			c.doc.pos[inner] = Position{n.Line, n.Column}
			v = n.Value
			if long == "Fn::GetAtt" {
				// !GetAtt Resource.Attribute is the list [Resource, Attribute].
				if res, attr, found := strings.Cut(n.Value, "."); found {
					v = []any{res, attr}
				}
			}
		} else {
			v, err = c.untagged(n, inner, depth)
		}
		return map[string]any{long: v}, err
	}
	return c.untagged(n, ptr, depth)
}

// untagged converts n as if it had no custom tag.
func (c *converter) untagged(n *yaml.Node, ptr string, depth int) (any, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return c.scalar(n, ptr), nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			v, err := c.convert(item, ptr+"/"+strconv.Itoa(i), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := map[string]any{}
		if err := c.mapping(n, ptr, depth, out, map[string]bool{}); err != nil {
			return nil, err
		}
		return out, nil
	case yaml.AliasNode:
		return c.convert(n.Alias, ptr, depth+1)
	}
	return nil, nil
}

// mapping fills out from the mapping n. Keys set explicitly win over keys
// brought in by a merge (<<), as YAML's merge key says.
func (c *converter) mapping(n *yaml.Node, ptr string, depth int, out map[string]any, explicit map[string]bool) error {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			c.problem(k, ptr, "a mapping key must be a plain string")
			continue
		}
		name := k.Value
		child := ptr + "/" + escapeToken(name)
		if explicit[name] {
			c.problem(k, child, fmt.Sprintf("key %q appears more than once", name))
			continue
		}
		explicit[name] = true
		if _, ok := c.doc.key[child]; !ok {
			c.doc.key[child] = Position{k.Line, k.Column}
		}
		val, err := c.convert(v, child, depth+1)
		if err != nil {
			return err
		}
		out[name] = val
	}
	for _, m := range merges {
		for m.Kind == yaml.AliasNode {
			m = m.Alias
		}
		var sources []*yaml.Node
		switch m.Kind {
		case yaml.MappingNode:
			sources = []*yaml.Node{m}
		case yaml.SequenceNode:
			sources = m.Content
		default:
			c.problem(m, ptr, "a merge key (<<) takes a mapping or a list of mappings")
			continue
		}
		for _, s := range sources {
			for s.Kind == yaml.AliasNode {
				s = s.Alias
			}
			if s.Kind != yaml.MappingNode {
				c.problem(s, ptr, "a merge key (<<) takes a mapping or a list of mappings")
				continue
			}
			merged := map[string]any{}
			if err := c.mapping(s, ptr, depth+1, merged, map[string]bool{}); err != nil {
				return err
			}
			for k, v := range merged {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	return nil
}

func (c *converter) scalar(n *yaml.Node, ptr string) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err == nil {
			return b
		}
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
		var u uint64
		if err := n.Decode(&u); err == nil {
			return json.Number(strconv.FormatUint(u, 10))
		}
	case "!!float":
		var f float64
		if err := n.Decode(&f); err == nil {
			if math.IsInf(f, 0) || math.IsNaN(f) {
				c.problem(n, ptr, fmt.Sprintf("%s has no JSON equivalent", n.Value))
				return n.Value
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
	// !!str, !!timestamp, !!binary and anything unreadable stay text.
	return n.Value
}
