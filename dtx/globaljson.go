package dtx

import (
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"
)

// plainGlobal is Global without its JSON methods.
type plainGlobal Global

// storedGlobal is Global's JSON as stores keep it. A JSON string holds
// only UTF-8, and encoding/json replaces anything else; a gRPC
// transaction's payloads are protobuf bytes, so when any payload is not
// UTF-8 they are all kept in base64 instead.
type storedGlobal struct {
	plainGlobal
	PayloadsB64 []string `json:"payloads_b64,omitempty"`
}

// MarshalJSON keeps binary payloads exact (see storedGlobal).
func (g Global) MarshalJSON() ([]byte, error) {
	s := storedGlobal{plainGlobal: plainGlobal(g)}
	for _, p := range g.Payloads {
		if !utf8.ValidString(p) {
			s.PayloadsB64 = make([]string, len(g.Payloads))
			for i, p := range g.Payloads {
				s.PayloadsB64[i] = base64.StdEncoding.EncodeToString([]byte(p))
			}
			s.Payloads = nil
			break
		}
	}
	return json.Marshal(s)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (g *Global) UnmarshalJSON(b []byte) error {
	var s storedGlobal
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*g = Global(s.plainGlobal)
	if s.PayloadsB64 != nil {
		g.Payloads = make([]string, len(s.PayloadsB64))
		for i, p := range s.PayloadsB64 {
			d, err := base64.StdEncoding.DecodeString(p)
			if err != nil {
				return err
			}
			g.Payloads[i] = string(d)
		}
	}
	return nil
}
