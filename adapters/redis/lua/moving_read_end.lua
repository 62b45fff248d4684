end
return { moved, read() }
