"""A small DOM from html.parser, for structure tests of generated HTML (never string matching on markup).

`parse(text)` returns the document root; `Element.find_all(tag, **attrs)` walks it; `text()` is the text a
reader sees (character references decoded), so an escaped `<script>` in a log line is text, not an element.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Iterator

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list["Element | str"] = field(default_factory=list)
    parent: "Element | None" = None

    def iter(self) -> Iterator["Element"]:
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list["Element"]:
        """Descendants (self included) with this tag and attributes; `class_` matches one class among several."""
        found = []
        for el in self.iter():
            if tag is not None and el.tag != tag:
                continue
            ok = True
            for key, value in attrs.items():
                if key == "class_":
                    ok = ok and value in el.attrs.get("class", "").split()
                else:
                    ok = ok and el.attrs.get(key.replace("_", "-")) == value
            if ok:
                found.append(el)
        return found

    def find(self, tag: str | None = None, **attrs: str) -> "Element":
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag} {attrs}> under <{self.tag} {self.attrs}>"
        return found[0]

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, {k: v or "" for k, v in attrs}, parent=self.stack[-1])
        self.stack[-1].children.append(el)
        if tag not in VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}, parent=self.stack[-1]))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return
        raise AssertionError(f"</{tag}> closes nothing open (open: {[e.tag for e in self.stack]})")

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(text: str) -> Element:
    builder = _Builder()
    builder.feed(text)
    builder.close()
    return builder.root


def external_urls(root: Element) -> list[str]:
    """Every attribute or style that would make a browser fetch from a network (http:, https:, protocol-relative)."""
    found = []
    for el in root.iter():
        for key, value in el.attrs.items():
            v = value.strip().lower()
            if key in ("src", "href", "xlink:href", "action", "formaction", "poster", "data", "srcset", "background") and (
                    v.startswith(("http:", "https:", "//", "ftp:", "ws:", "wss:"))):
                found.append(f"<{el.tag} {key}={value!r}>")
            if key == "style" and ("url(" in v or "@import" in v):
                found.append(f"<{el.tag} style={value!r}>")
        if el.tag == "style":
            css = el.text().lower()
            if "url(" in css or "@import" in css:
                found.append("<style> with url( or @import")
        if el.tag == "link":
            found.append(f"<link {el.attrs}>")
    return found
