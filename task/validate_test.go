package task

import (
	"errors"
	"testing"

	"github.com/sluice-db/sluice"
)

// TestValidateSections: one wrong field per section of Validate, each
// named with its own text, and the first section's error wins.
func TestValidateSections(t *testing.T) {
	t.Setenv("SLUICE_TEST_PW", "s3cret")
	for _, c := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"endpoint", func(c *Config) { c.Target.Port = 0 }, "target.port is 0"},
		{"endpoint order", func(c *Config) { c.Source.User, c.Target.User = "", "" }, "source.user is empty"},
		{"name", func(c *Config) { c.Name = "a b" }, "name must be a non-empty word"},
		{"tables", func(c *Config) { c.Tables.Exclude = []string{"nodot"} }, "tables pattern \"nodot\" must be schema.table, e.g. \"db.*\" (quote a name that holds a dot: `x.y`.*)"},
		{"routes", func(c *Config) { c.Routes[1].TargetSchema = "" }, "routes[1] needs schema and target-schema"},
		{"copy", func(c *Config) { c.RowsPerStatement = -1 }, "rows-per-statement must be 0 (LOAD DATA) or positive"},
		{"incremental", func(c *Config) { c.Incremental.OnlineDDL = "lhm" }, "incremental.online-ddl must be gh-ost, pt-osc or none"},
		{"incremental order", func(c *Config) { c.Incremental.Batch, c.Incremental.Flavor = 0, "x" }, "incremental.batch must be positive"},
		{"sink", func(c *Config) { c.present["sink"] = true }, "sink names no sink (use sink: {kafka: {brokers: [host:port], topic-prefix: P}})"},
		{"serve", func(c *Config) { c.present["serve"] = true; c.Serve.Listen = "" }, "serve.listen is empty (e.g. 127.0.0.1:3310)"},
		{"first section wins", func(c *Config) { c.Name, c.Threads = "", 0 }, "name must be a non-empty word"},
	} {
		cfg, err := Parse([]byte(good))
		if err != nil {
			t.Fatal(err)
		}
		c.change(cfg)
		err = cfg.Validate()
		var se *sluice.Error
		if !errors.As(err, &se) || !errors.Is(err, sluice.ErrConfig) || se.Hint == "" {
			t.Errorf("%s: want a config error with a hint, got %v", c.name, err)
			continue
		}
		if got := se.Err.Error(); got != "invalid configuration: "+c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, "invalid configuration: "+c.want)
		}
	}
}
