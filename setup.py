"""Build hook for the rules library's native kernels (hand ranking, exact Hold'em analysis)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "croupier_rules._native",
            sources=["libs/rules/native/native.c", "libs/rules/native/holdem.c"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-pthread"],
            extra_link_args=["-pthread"],
        )
    ]
)
