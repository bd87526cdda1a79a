package jsonhttp

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// unknownField finds the key encoding/json refused as unknown: it walks data
// along t in document order, matching object keys to struct fields as
// encoding/json does (exact name first, then case-insensitive; fields of
// embedded structs promoted), and returns the full path of the first key t
// has no field for — "spec.bogus", "requested_by.x", "records[2].y" — with
// the key itself. Values that decode themselves (json.Unmarshaler,
// json.RawMessage, interfaces) are not looked into, as encoding/json does
// not look into them either.
//
// It runs only once decoding has failed on an unknown field, so a request
// that decodes pays nothing for it.
func unknownField(data []byte, t reflect.Type) (path, key string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{dec: dec}
	w.value(t, "") // ends at the first unknown key (errFound) or at a problem the decoder reported already
	return w.path, w.key, w.found
}

type walker struct {
	dec       *json.Decoder
	found     bool
	path, key string // the first unknown key and its path, once found
}

// errFound stops the walk at the first unknown key.
type errFound struct{}

func (errFound) Error() string { return "found" }

// value reads one JSON value that decodes into t (nil: a value not looked
// into) at path.
func (w *walker) value(t reflect.Type, path string) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar holds no keys
	}
	t = structural(t)
	switch {
	case d == '{' && t != nil && t.Kind() == reflect.Struct:
		fields := fieldsOf(t)
		for w.dec.More() {
			key, err := w.objectKey()
			if err != nil {
				return err
			}
			ft, known := fields.lookup(key)
			if !known {
				w.found, w.path, w.key = true, joinPath(path, key), key
				return errFound{}
			}
			if err := w.value(ft, joinPath(path, key)); err != nil {
				return err
			}
		}
	case d == '{' && t != nil && t.Kind() == reflect.Map:
		for w.dec.More() {
			key, err := w.objectKey()
			if err != nil {
				return err
			}
			if err := w.value(t.Elem(), joinPath(path, key)); err != nil {
				return err
			}
		}
	case d == '[' && t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := 0; w.dec.More(); i++ {
			et := t.Elem()
			if t.Kind() == reflect.Array && i >= t.Len() {
				et = nil // encoding/json drops elements past an array's length unread
			}
			if err := w.value(et, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	default: // a value encoding/json does not look into, or a type error
		for w.dec.More() {
			if d == '{' {
				if _, err := w.objectKey(); err != nil {
					return err
				}
			}
			if err := w.value(nil, ""); err != nil {
				return err
			}
		}
	}
	_, err = w.dec.Token() // the closing delimiter
	return err
}

func (w *walker) objectKey() (string, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return "", err
	}
	key, _ := tok.(string)
	return key, nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// structural is the type whose keys or elements encoding/json matches when
// it decodes into t: t without its pointers, or nil when t decodes itself
// or takes any value.
func structural(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) ||
			t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
			return nil
		}
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return t
		}
	}
	return nil
}

// field is one JSON field of a struct, as encoding/json lists them.
type field struct {
	name   string
	typ    reflect.Type
	depth  int  // how deep in embedded structs
	tagged bool // named by a json tag
	index  []int
}

type fieldList []field

// lookup finds the field a key decodes into: the exact name first, then the
// first name equal under case folding (encoding/json's foldName matches what
// bytes.EqualFold does).
func (fs fieldList) lookup(key string) (reflect.Type, bool) {
	for _, f := range fs {
		if f.name == key {
			return f.typ, true
		}
	}
	for _, f := range fs {
		if strings.EqualFold(f.name, key) {
			return f.typ, true
		}
	}
	return nil, false
}

// fieldsOf lists the fields encoding/json decodes into for struct type t,
// following its rules (encoding/json typeFields): exported fields and the
// fields of embedded structs, "-" skipped; among fields of one name the
// shallowest wins, a tagged one before an untagged one at the same depth, and
// a tie hides them all. The list is in the order of the fields' indexes.
func fieldsOf(t reflect.Type) fieldList {
	type level struct {
		typ   reflect.Type
		index []int
	}
	var all []field
	visited := map[reflect.Type]bool{}
	next := []level{{typ: t}}
	for depth := 0; len(next) > 0; depth++ {
		current := next
		next = nil
		for _, lv := range current {
			if visited[lv.typ] {
				continue
			}
			visited[lv.typ] = true
			for i := range lv.typ.NumField() {
				sf := lv.typ.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				index := append(append([]int(nil), lv.index...), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					all = append(all, field{name: name, typ: sf.Type, depth: depth, tagged: tagged, index: index})
					continue
				}
				next = append(next, level{typ: ft, index: index})
			}
		}
	}
	// Keep the dominant field of each name.
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.name != b.name {
			return a.name < b.name
		}
		if a.depth != b.depth {
			return a.depth < b.depth
		}
		return a.tagged && !b.tagged
	})
	var out fieldList
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].name == all[i].name {
			j++
		}
		if j-i == 1 || all[i].depth != all[i+1].depth || all[i].tagged != all[i+1].tagged {
			out = append(out, all[i])
		}
		i = j
	}
	sort.Slice(out, func(i, j int) bool { return indexLess(out[i].index, out[j].index) })
	return out
}

func indexLess(a, b []int) bool {
	for k := 0; k < len(a) && k < len(b); k++ {
		if a[k] != b[k] {
			return a[k] < b[k]
		}
	}
	return len(a) < len(b)
}

// pathOfString returns the path ("deadline", "items[2].at") of the string
// value v in data that decodes into a value of type want inside t, or else
// of the first string value equal to v: where a value that decodes itself
// (a time) and failed sits in the body.
func pathOfString(data []byte, v string, t, want reflect.Type) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		array bool
		key   string
		index int
	}
	var stack []level
	path := func() string {
		var b strings.Builder
		for _, l := range stack {
			if l.array {
				b.WriteString("[" + strconv.Itoa(l.index) + "]")
			} else {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(l.key)
			}
		}
		return b.String()
	}
	typeHere := func() reflect.Type {
		cur := t
		for _, l := range stack {
			for cur != nil && cur.Kind() == reflect.Pointer {
				cur = cur.Elem()
			}
			switch {
			case cur == nil:
				return nil
			case l.array && (cur.Kind() == reflect.Slice || cur.Kind() == reflect.Array):
				cur = cur.Elem()
			case !l.array && cur.Kind() == reflect.Struct:
				cur, _ = fieldsOf(cur).lookup(l.key)
			case !l.array && cur.Kind() == reflect.Map:
				cur = cur.Elem()
			default:
				return nil
			}
		}
		for cur != nil && cur.Kind() == reflect.Pointer {
			cur = cur.Elem()
		}
		return cur
	}
	first, found := "", false
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return first, found
		}
		// A value ends: the next token of an object is a key, of an array
		// the next element.
		done := func() {
			if n := len(stack); n > 0 {
				if stack[n-1].array {
					stack[n-1].index++
				} else {
					expectKey = true
				}
			}
		}
		switch tk := tok.(type) {
		case json.Delim:
			switch tk {
			case '{':
				stack = append(stack, level{})
				expectKey = true
			case '[':
				stack = append(stack, level{array: true})
				expectKey = false
			default:
				stack = stack[:len(stack)-1]
				done()
			}
		case string:
			if expectKey && len(stack) > 0 && !stack[len(stack)-1].array {
				stack[len(stack)-1].key = tk
				expectKey = false
				continue
			}
			if tk == v {
				if typeHere() == want {
					return path(), true
				}
				if !found {
					first, found = path(), true
				}
			}
			done()
		default:
			done()
		}
	}
}
