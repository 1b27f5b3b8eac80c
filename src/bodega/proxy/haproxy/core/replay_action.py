"""The Lua action behind fly-replay on HAProxy: hand a request to bodega's proxy again. Pure.

HAProxy cannot send a request a second time by itself. When a machine's
response carries ``fly-replay``, this action (run only then) takes the
request HAProxy kept aside in variables (method, path and query, headers,
and the body when it fit the buffer) and sends it to bodega's proxy (the
activator) with ``x-bodega-replay: <fly-replay's value>;src=<the machine's
address>``, through HAProxy's own HTTP client; the answer replaces the
machine's. Requests whose body did not fit, or with a method the client
cannot send (not GET, HEAD, POST, PUT or DELETE), get the machine's answer
as it is. See ``bodega.proxy.core.replay``.
"""

from __future__ import annotations

MAX_BODY = 15000  # bytes of body HAProxy keeps for a replay (what one 16 kB buffer holds)

LUA = r"""
-- Written by bodega proxy: fly-replay (see bodega/proxy/haproxy/core/replay_action.py).
local activator = "%(activator)s"
local hop = { ["content-length"]=true, ["connection"]=true, ["transfer-encoding"]=true,
              ["host"]=true, ["keep-alive"]=true, ["upgrade"]=true }

core.register_action("fly_replay", { "http-res" }, function(txn)
  local method = txn:get_var("txn.replay_method")
  local uri = txn:get_var("txn.replay_uri")
  local raw = txn:get_var("txn.replay_hdrs")
  local body = txn:get_var("txn.replay_body") or ""
  local size = tonumber(txn:get_var("txn.replay_size") or "0") or 0
  if method == nil or uri == nil or raw == nil or size > #body then return end
  local hc = core.httpclient()
  local call = ({ GET=hc.get, HEAD=hc.head, POST=hc.post, PUT=hc.put, DELETE=hc.delete })[method]
  if call == nil then return end
  local headers, host = {}, "localhost"
  for line in string.gmatch(raw, "[^\r\n]+") do
    local name, value = string.match(line, "^([^:]+):%%s*(.-)%%s*$")
    if name ~= nil then
      local key = string.lower(name)
      if key == "host" then host = value end
      if not hop[key] then
        headers[key] = headers[key] or {}
        table.insert(headers[key], value)
      end
    end
  end
  local src = txn.sf:bc_dst() .. ":" .. txn.sf:bc_dst_port()
  headers["x-bodega-replay"] = { txn.sf:res_hdr("fly-replay") .. ";src=" .. src }
  local res = call(hc, { url="http://" .. host .. uri, dst=activator, headers=headers,
                         body=body, timeout=60000 })
  if res == nil or res.status == nil or res.status == 0 then return end
  local reply = txn:reply()
  reply:set_status(res.status, res.reason)
  for name, values in pairs(res.headers or {}) do
    if not hop[string.lower(name)] then
      for _, value in pairs(values) do reply:add_header(name, value) end
    end
  end
  reply:set_body(res.body or "")
  txn:done(reply)
end)
"""


def render_lua(activator: str) -> str:
    return LUA % {"activator": activator}
