package dtx

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
)

// alert posts dtm's alert for a branch that keeps failing to the
// configured webhook, as dtm does (in the driving goroutine, bounded by
// the request timeout). A webhook that fails is logged, never retried:
// the next failed attempt alerts again.
func (c *Coordinator) alert(ctx context.Context, g *Global, branchURL, errText string, retries int) {
	body, _ := json.Marshal(map[string]any{"gid": g.Gid, "status": g.Status, "branch": branchURL,
		"error": errText, "retry_count": retries})
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.AlertWebhook, bytes.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				c.log.Error("dtx: alert webhook answered", "status", resp.StatusCode, "gid", g.Gid)
			}
			return
		}
	}
	c.log.Error("dtx: alert webhook", "err", err, "gid", g.Gid)
}
