-- The version tag of a plain-string entity (layout `t`) holds the version and
-- the SHA-1 of the value it describes, `<version>:<sha1 hex>`, so a value
-- another program wrote over a migrated string (`SET`, `APPEND`, `INCR`)
-- reads as version 0 although the tag outlives it. Other containers' tags are
-- the bare version. `tag_of(lay, version, value)` is the tag to write;
-- `version_of(lay, tag, value)` the version the stored tag gives the stored
-- value (a bare tag on a string: written before tags held the digest, read as
-- it says). Rust's twin: `wire::text_tag` and `wire::tag_version`.
local function tag_of(lay, version, value)
  if lay == 't' then return version .. ':' .. redis.sha1hex(value) end
  return version
end
local function version_of(lay, tag, value)
  if not tag then return '0' end
  if lay ~= 't' then return tag end
  local v, digest = string.match(tag, '^(%d+):(%x+)$')
  if not v then return tag end
  if value and redis.sha1hex(value) == digest then return v end
  return '0'
end
