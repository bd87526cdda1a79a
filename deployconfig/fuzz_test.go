package deployconfig

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzValidate: whatever the bytes, Validate neither panics nor returns
// anything but problems or a *SyntaxError. The examples seed it.
func FuzzValidate(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(filepath.Ext(name) == ".json", data)
	}
	f.Add(false, []byte("a: !GetAtt\nb: !Sub [x, {y: !Ref z}]\n<<: [1, *x]\n"))
	v, err := New()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, isJSON bool, data []byte) {
		name := "f.yml"
		if isJSON {
			name = "f.json"
		}
		problems, err := v.Validate(name, data)
		var se *SyntaxError
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("Validate(%q) error = %v, want nil or a *SyntaxError", data, err)
		}
		for _, p := range problems {
			if p.Message == "" {
				t.Fatalf("Validate(%q) has a problem without a message: %+v", data, p)
			}
		}
	})
}
