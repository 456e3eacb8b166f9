// The editor page's CodeMirror view: line numbers, wrapping at words, the own selection
// drawn, the others' cursors as widgets in their person's colour (cursors at one place
// share one widget, their names in one label, so names never overprint; the label shows
// on hover, above the line only then), keys for undo and redo that take back the
// person's own edits (cm_binding.js). Every transaction goes through `dispatch(tr)` of
// the page, which sends the person's edits before the view takes them.
import {
  Decoration, EditorState, EditorView, StateEffect, StateField, WidgetType, defaultKeymap,
  deleteCharBackward, drawSelection, findClusterBreak, highlightSpecialChars, keymap,
  lineNumbers,
} from "/static/codemirror.js";

// Backspace at a cursor takes the whole grapheme cluster before it (an emoji with its
// skin tone, a letter with its combining accents, a flag): CodeMirror's own takes its
// last code point only. At the start of a line, and with a selection, CodeMirror's.
export function deleteClusterBackward(view) {
  const { state } = view;
  const range = state.selection.main;
  const line = state.doc.lineAt(range.head);
  if (!range.empty || state.selection.ranges.length > 1 || range.head === line.from) {
    return deleteCharBackward(view);
  }
  const from = line.from + findClusterBreak(line.text, range.head - line.from, false, true);
  view.dispatch({ changes: { from, to: range.head }, selection: { anchor: from },
    userEvent: "delete.backward", scrollIntoView: true });
  return true;
}

// the others' cursors and selections: {cursors: [[offset, [[member, colour class], ...]],
// ...], selections: [[from, to, member, colour class], ...]}
export const setCursors = StateEffect.define();

class CursorsWidget extends WidgetType {
  constructor(members) {
    super();
    this.members = members;
    this.key = members.map(([m, c]) => `${m}/${c}`).join(" ");
  }

  eq(other) {
    return other.key === this.key;
  }

  toDOM() {
    const box = document.createElement("span");
    box.className = "cm-remote";
    const label = document.createElement("span");
    label.className = "cm-remote-label";
    this.members.forEach(([member, colour], k) => {
      const caret = document.createElement("span");
      caret.className = `cursor ${colour}`;
      caret.dataset.member = member;
      caret.style.left = `${k * 2}px`;
      box.appendChild(caret);
      const name = document.createElement("span");
      name.className = colour;
      name.textContent = member;
      label.appendChild(name);
    });
    box.dataset.members = this.members.map(([m]) => m).join(" ");
    box.title = this.members.map(([m]) => m).join(", ");
    box.appendChild(label);
    return box;
  }

  ignoreEvent() {
    return false;
  }
}

const cursorsField = StateField.define({
  create: () => Decoration.none,
  update(cursors, tr) {
    let next = cursors.map(tr.changes);
    for (const effect of tr.effects) {
      if (effect.is(setCursors)) {
        const { cursors: carets, selections } = effect.value;
        next = Decoration.set([
          ...selections.map(([from, to, member, colour]) => Decoration.mark({
            class: `cm-remote-selection ${colour}`, attributes: { "data-member": member, title: member },
          }).range(from, to)),
          ...carets.map(([at, members]) => Decoration.widget({
            widget: new CursorsWidget(members), side: 1,
          }).range(at)),
        ], true);
      }
    }
    return next;
  },
  provide: (field) => EditorView.decorations.from(field),
});

const theme = EditorView.theme({
  "&": { height: "100%", border: "1px solid #ccc" },
  "&.cm-focused": { outline: "none", borderColor: "#48c" },
  ".cm-scroller": { fontFamily: "ui-monospace, monospace", lineHeight: "1.5" },
  // room above the first line for a cursor's label
  ".cm-content": { padding: "1.1em 0 0.4em" },
});

// keys: undo/redo (the person's own edits) before CodeMirror's defaults
export function makeView(parent, { dispatch, undo, redo }) {
  return new EditorView({
    parent,
    state: EditorState.create({
      doc: "",
      extensions: [
        lineNumbers(), highlightSpecialChars(), drawSelection(), EditorView.lineWrapping,
        EditorState.allowMultipleSelections.of(false), cursorsField, theme,
        EditorView.contentAttributes.of({ spellcheck: "false", "aria-label": "shared text" }),
        keymap.of([
          { key: "Mod-z", run: undo, preventDefault: true },
          { key: "Mod-Shift-z", run: redo, preventDefault: true },
          { key: "Mod-y", run: redo, preventDefault: true },
          { key: "Backspace", run: deleteClusterBackward, shift: deleteClusterBackward },
          ...defaultKeymap,
        ]),
      ],
    }),
    dispatchTransactions: (trs, view) => dispatch(trs, view),
  });
}
