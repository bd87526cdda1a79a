package ledger

import (
	"testing"
)

func TestResolveMode(t *testing.T) {
	for _, c := range []struct {
		want    Expectation
		version string
		mode    Expectation // "" when Open must refuse
	}{
		{ExpectAuto, "2.15.2", ExpectProject},
		{ExpectAuto, "2.11.0", ExpectProject},
		{ExpectAuto, "2.11.0-RC.1", ExpectProject},
		{ExpectAuto, "2.10.29", ExpectStream},
		{ExpectAuto, "2.9.10", ExpectStream}, // Debian 12
		{ExpectAuto, "3.0.0", ExpectProject},
		{ExpectProject, "2.15.2", ExpectProject},
		{ExpectProject, "2.9.10", ""},
		{ExpectStream, "2.15.2", ExpectStream},
		{ExpectStream, "2.9.10", ExpectStream},
		{ExpectAuto, "2.8.4", ""},
		{ExpectStream, "2.2.0", ""},
		{ExpectAuto, "", ""},
		{ExpectAuto, "two.eleven", ""},
		{ExpectAuto, "2.11", ""},
	} {
		got, err := resolveMode(c.want, c.version)
		if c.mode == "" {
			if err == nil {
				t.Errorf("resolveMode(%s, %q) = %s, nil; want an error", c.want, c.version, got)
			}
			continue
		}
		if err != nil || got != c.mode {
			t.Errorf("resolveMode(%s, %q) = %s, %v; want %s, nil", c.want, c.version, got, err, c.mode)
		}
	}
}
