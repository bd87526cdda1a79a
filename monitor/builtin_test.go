package monitor

import "testing"

// TestMonitorBuiltInConfigIsValid: the built-in file parses and validates,
// with and without projects.
func TestMonitorBuiltInConfigIsValid(t *testing.T) {
	for _, projects := range [][]string{nil, {"a", "b"}} {
		data, err := BuiltinFile("http://127.0.0.1:8000", projects, true)
		if err != nil {
			t.Fatal(err)
		}
		f, err := ParseFile(data)
		if err != nil {
			t.Fatalf("ParseFile(built-in) = %v", err)
		}
		cfg := DefaultConfig()
		cfg.File = f
		cfg.DataPath = t.TempDir() + "/m.db"
		cfg.Secrets[BuiltinTokenEnv] = "x"
		if err := cfg.Validate(); err != nil {
			t.Errorf("built-in configuration with projects %v: %v", projects, err)
		}
	}
}
