package preflight

import "testing"

// TestLikeMatch: a grant's schema is a LIKE pattern (% any run, _ one
// character, \ escapes), and glob characters in it are literal.
func TestLikeMatch(t *testing.T) {
	for _, c := range []struct {
		like, name string
		want       bool
	}{
		{"app", "app", true},
		{"app", "App", true}, // names match without case, as the task's patterns do
		{`app\_%`, "app_1", true},
		{`app\_%`, "appx1", false},
		{"app_%", "appx1", true},
		{"a%", "a", true},
		{"a_", "a", false},
		{"a*", "abc", false},
		{"a*", "a*", true},
		{"a?", "ab", false},
		{"[ab]", "[ab]", true},
	} {
		if got := likeMatch(c.like, c.name); got != c.want {
			t.Errorf("likeMatch(%q, %q) = %v", c.like, c.name, got)
		}
	}
}

// TestGrants: a global grant (ON *.*) of the privilege or of ALL
// PRIVILEGES; hasAnywhere takes a grant on anything.
func TestGrants(t *testing.T) {
	grants := []string{
		"GRANT RELOAD, REPLICATION CLIENT ON *.* TO `u`@`%`",
		"GRANT SELECT, INSERT ON `app`.* TO `u`@`%`",
	}
	if !hasGlobal(grants, "RELOAD") || hasGlobal(grants, "SELECT") {
		t.Error("hasGlobal: RELOAD is global, SELECT is not")
	}
	if !hasAnywhere(grants, "INSERT") || hasAnywhere(grants, "DROP") {
		t.Error("hasAnywhere: INSERT is granted on app.*, DROP nowhere")
	}
	all := []string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"}
	if !hasGlobal(all, "RELOAD") || !hasAnywhere(all, "DROP") {
		t.Error("ALL PRIVILEGES ON *.* holds every privilege")
	}
}
