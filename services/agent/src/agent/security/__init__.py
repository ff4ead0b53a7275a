"""security"""
