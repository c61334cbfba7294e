package storage

import "testing"

func TestDataDir(t *testing.T) {
	for _, tc := range []struct {
		url  string
		dir  string
		file bool
	}{
		{"file:./htq-data", "./htq-data", true},
		{"file:///var/lib/htq", "/var/lib/htq", true},
		{"FILE:data", "data", true},
		{"file:", "", true},
		{"mem:", "", false},
		{"redis://127.0.0.1:6379/0", "", false},
		{"./htq-data", "", false},
	} {
		dir, file := DataDir(tc.url)
		if dir != tc.dir || file != tc.file {
			t.Errorf("DataDir(%q) = %q, %v; want %q, %v", tc.url, dir, file, tc.dir, tc.file)
		}
	}
}
