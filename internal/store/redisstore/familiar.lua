-- guardian: an account's familiar networks (store.Familiar), run after
-- prelude.lua and before the script's own text.
--
-- A familiar list is one key holding "member:deadline" pairs separated by
-- ";", at most 8 of them (store.MaxFamiliar), members being short base64url
-- tags; the key expires with its last deadline.

-- familiarList parses a list value into members and deadlines, the expired
-- ones left out, or nil for a value that is not a list.
local function familiarList(v)
  local list = {}
  if not v then
    return list
  end
  local rest = v
  for m, d in string.gmatch(v, '([%w_-]+):(%d+);') do
    d = tonumber(d)
    if d > now then
      list[#list + 1] = { m = m, d = d }
    end
    rest = nil
  end
  if rest and v ~= '' then
    return nil
  end
  return list
end

-- familiarOp evaluates the familiar op on key i for member: whether the
-- member is on the list, how long it stays there, how many the list holds;
-- nil when the key holds something else.
local function familiarOp(i, member)
  local list = familiarList(get(i))
  if not list then
    return nil
  end
  local r = { found = false, reset = 0, count = 0 }
  r.count = #list
  for _, e in ipairs(list) do
    if e.m == member then
      r.found, r.reset = true, e.d - now
    end
  end
  return r
end

-- familiarAdd puts a member on the list at key i until hold microseconds
-- from now, spec being "hold:member"; a member already there keeps the later
-- deadline, and a full list drops the member forgotten soonest.
familiarAdd = function(i, spec)
  local hold, member = string.match(spec or '', '^(%d+):([%w_-]+)$')
  if not hold then
    return nil, 'guardian: bad familiar entry'
  end
  local list = familiarList(get(i))
  if not list then
    return nil, 'guardian: bad familiar state'
  end
  local d = now + tonumber(hold)
  local kept = {}
  for _, e in ipairs(list) do
    if e.m == member then
      if e.d > d then
        d = e.d
      end
    else
      kept[#kept + 1] = e
    end
  end
  if #kept >= 8 then
    local soonest = 1
    for j, e in ipairs(kept) do
      if e.d < kept[soonest].d then
        soonest = j
      end
    end
    table.remove(kept, soonest)
  end
  kept[#kept + 1] = { m = member, d = d }
  local parts, last = {}, now
  for j, e in ipairs(kept) do
    parts[j] = e.m .. ':' .. int(e.d) .. ';'
    if e.d > last then
      last = e.d
    end
  end
  put(i, table.concat(parts), last)
  return true
end
