"""``groupcomm web``: the IM and the shared editor in browsers, each tab a member."""
