// One colour per person, the same in every tab and in the terminal editor: the Python
// function groupcomm.apps.colours.colour_slot in JavaScript (a test checks they agree).
// FNV-1a (32 bits) of the person's name in UTF-8, modulo the palette's six slots.
export const SLOTS = 6;

// The person a member stands for: ann:2~3 (ann's second tab, third incarnation) is ann.
export function person(member) {
  return member.split("~")[0].split(":")[0];
}

export function colourSlot(member) {
  let value = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(person(member))) {
    value = Math.imul(value ^ byte, 0x01000193) >>> 0;
  }
  return value % SLOTS;
}
